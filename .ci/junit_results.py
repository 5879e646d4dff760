"""Turn pytest's JUnit XML into a results file that names every test, its outcome and the commit.

    python3 .ci/junit_results.py JUNIT.xml OUT.json --command "the pytest command"

OUT.json: ``{"commit", "command", "machine", "counts": {outcome: n}, "tests": [{"id", "outcome", "seconds", "message"}]}``,
and OUT.json gets its entry in the ``provenance.json`` beside it (:mod:`flamingo_sim.provenance`).
The commit is the checkout's HEAD, or ``FLAMINGO_SIM_COMMIT`` where the tree is a copy without git
(the GPU machine). Used by benchmarks/gpu_device.sh for the CUDA tests."""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tests_of(junit_xml: str) -> list[dict]:
    """One record per ``<testcase>``: ``id`` (pytest's node id), ``outcome`` (passed, failed, error, skipped), seconds, message."""
    out = []
    for case in ET.fromstring(junit_xml).iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        path = classname.replace(".", "/")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome, message = {"failure": "failed"}.get(tag, tag), (el.get("message") or "")[:500]
                break
        out.append({"id": f"{path}.py::{name}", "outcome": outcome, "seconds": float(case.get("time", 0) or 0), "message": message})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("junit", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--command", required=True, help="the pytest command that wrote the JUnit file")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from flamingo_sim import provenance

    tests = tests_of(args.junit.read_text())
    if not tests:
        raise SystemExit(f"{args.junit}: no <testcase>: the tests did not run")
    record = provenance.describe(args.command)
    doc = {"commit": record["commit"], "command": args.command, "machine": record["machine"],
           "counts": dict(Counter(t["outcome"] for t in tests)), "tests": tests}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    provenance.stamp([args.out], args.command, record=record)
    print(f"{args.out}: {len(tests)} tests, " + ", ".join(f"{n} {k}" for k, n in sorted(doc["counts"].items())) + f"; commit {record['commit']}")
    return 1 if doc["counts"].get("failed") or doc["counts"].get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
