"""Mutation testing of the core arithmetic, in one command: mutmut 3 on a copy of this checkout.

    nice -n 19 python .ci/mutation.py core --out benchmarks/results/mutation_core_2cores.json
    nice -n 19 python .ci/mutation.py device-model --out benchmarks/results/mutation_device_model_2cores.json
    nice -n 19 python .ci/mutation.py radio-network --out benchmarks/results/mutation_radio_network_2cores.json
    python .ci/mutation.py flamingo_sim/devices/battery.py --sample 200 --out OUT.json   # one module, 200 of its mutants
    python .ci/mutation.py core --recheck OUT.json --out AFTER.json   # an earlier run's survivors, on today's tests

A target is a group name (:data:`GROUPS`) or a module path of :data:`TESTS` (a file, or a folder
for all its modules). The script copies the checkout's files (tracked and untracked, not ignored)
into a work folder (``--workdir``, default a new temporary one), writes the ``[tool.mutmut]``
section there (the modules, the tests that exercise them: :data:`TESTS`), runs ``mutmut run``, and
writes one JSON file: per module the mutants, killed, survived, not reached by a test and timed
out, its score (killed / checked), every survivor with its diff, and the provenance (commit,
command, machine). The checkout itself is never changed (``mutmut`` writes only in the copy).

``--sample N`` checks N mutants drawn deterministically (the N with the smallest SHA-256 of their
name, per run, so the same tree gives the same sample); the file says so. Needs ``mutmut`` (3.x):
``pip install 'flamingo-sim[mutation]'``. Hours on 2 cores for a whole group: a manual job.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module (or folder) -> the tests that exercise it (mutmut runs, per mutant, those of them that reach it)
TESTS: dict[str, list[str]] = {
    "flamingo_sim/fl/sim/simulation.py": ["tests/fl/sim"],
    "flamingo_sim/fl/sim/fedbuff.py": ["tests/fl/sim/test_fedbuff.py", "tests/fl/sim/test_hooks.py"],
    "flamingo_sim/devices/battery.py": ["tests/devices/test_battery.py", "tests/devices/test_online.py", "tests/fl/sim/test_records.py"],
    "flamingo_sim/devices/energy.py": ["tests/devices/test_energy.py", "tests/devices/test_profiler.py"],
    "flamingo_sim/devices/thermal.py": ["tests/devices/test_thermal.py", "tests/devices/test_thermal_table.py", "tests/devices/test_survivors.py"],
    "flamingo_sim/devices/radio.py": ["tests/devices/test_radio.py", "tests/devices/test_survivors.py", "tests/fl/sim/test_network.py",
                                      "tests/fl/test_survivors.py"],
    "flamingo_sim/fl/sim/network.py": ["tests/fl/sim/test_network.py", "tests/fl/test_survivors.py", "tests/fl/sim/test_simulation_network.py"],
    "flamingo_sim/traces/network.py": ["tests/traces/test_traces_network.py", "tests/traces/test_survivors.py"],
    "flamingo_sim/devices/execution.py": ["tests/devices/test_execution.py", "tests/devices/test_scheduling.py"],
    "flamingo_sim/fl/sim/limits.py": ["tests/fl/sim/test_limits.py"],
    "flamingo_sim/devices/policies": ["tests/devices/test_policies.py", "tests/devices/test_exploration.py", "tests/devices/test_policies_least_energy.py",
                                      "tests/fl/sim/test_hooks.py"],
    "flamingo_sim/devices/scheduling.py": ["tests/devices/test_scheduling.py", "tests/devices/test_execution.py", "tests/devices/test_survivors.py"],
    "flamingo_sim/devices/power.py": ["tests/devices/test_power.py", "tests/devices/test_profiles.py"],
    "flamingo_sim/devices/memory.py": ["tests/fl/sim/test_limits.py", "tests/fl/training/test_memory_peak.py"],
    "flamingo_sim/fl/strategy/aggregate.py": ["tests/fl/strategy/test_aggregate.py", "tests/fl/sim/test_fedbuff.py", "tests/fl/test_survivors.py"],
    "flamingo_sim/fl/strategy/aggregators.py": ["tests/fl/strategy/test_aggregators.py"],
    "flamingo_sim/fl/strategy/selection.py": ["tests/fl/strategy/test_selection.py"],
    "flamingo_sim/fl/metrics/target.py": ["tests/fl/metrics/test_target.py", "tests/fl/test_survivors.py"],
}

#: named sets of modules
GROUPS: dict[str, list[str]] = {
    # the round loop, FedBuff, the battery and the energy budget
    "core": ["flamingo_sim/fl/sim/simulation.py", "flamingo_sim/fl/sim/fedbuff.py", "flamingo_sim/devices/battery.py",
             "flamingo_sim/devices/energy.py"],
    # the device model (thermal, the memory and thermal limits, the policies, Android's scheduling, power, memory)
    "device-model": ["flamingo_sim/devices/thermal.py", "flamingo_sim/fl/sim/limits.py", "flamingo_sim/devices/policies",
                     "flamingo_sim/devices/scheduling.py", "flamingo_sim/devices/power.py", "flamingo_sim/devices/memory.py",
                     "flamingo_sim/devices/execution.py"],
    # the radio's energy and the network a transfer runs on (issue 50: none of them was in any group)
    "radio-network": ["flamingo_sim/devices/radio.py", "flamingo_sim/fl/sim/network.py", "flamingo_sim/traces/network.py"],
    # selection and aggregation, and time to target
    "strategy": ["flamingo_sim/fl/strategy/aggregate.py", "flamingo_sim/fl/strategy/aggregators.py",
                 "flamingo_sim/fl/strategy/selection.py", "flamingo_sim/fl/metrics/target.py"],
}

#: tests that cannot pass in mutmut's copy: it copies the package's links to the shipped data
#: (flamingo_sim/data/*) as folders, and this one compares the resolved folders
DESELECT = ["tests/devices/test_profiler.py::test_profile_goes_to_the_user_folder_and_experiments_find_it"]

#: mutmut's progress lines (a spinner), left out of what the script repeats
SPINNER = re.compile(r"^\s*[\u2800-\u28ff] ")

#: a line of ``mutmut results --all true``: ``    flamingo_sim.x.y.x_f__mutmut_3: survived``
RESULT_LINE = re.compile(r"^\s+([\w.]+__mutmut_\d+):\s+(.+?)\s*$")


def modules_of(targets: list[str]) -> list[str]:
    """The module paths the targets name (groups expanded), in order, each once; one line for an unknown one."""
    out: list[str] = []
    for t in targets:
        for m in GROUPS.get(t, [t]):
            if m not in TESTS:
                raise SystemExit(f"mutation.py: unknown target {m!r}: expected a group ({', '.join(GROUPS)}) or one of {', '.join(TESTS)}")
            if m not in out:
                out.append(m)
    return out


def mutmut_section(modules: list[str]) -> str:
    """The ``[tool.mutmut]`` section for ``modules`` and their tests (TOML)."""
    tests = sorted({t for m in modules for t in TESTS[m]})
    only = [m if m.endswith(".py") else f"{m}/*" for m in modules]
    deselect = [a for t in DESELECT for a in ("--deselect", t)]
    return ("\n[tool.mutmut]\n"
            'source_paths = ["flamingo_sim"]\n'
            "# torch's thread pools do not survive a fork: each mutant from a fork server that has not imported it\n"
            'process_isolation = "forkserver"\n'
            f"only_mutate = {json.dumps(only)}\n"
            "# the package's links to the shipped data (flamingo_sim/data/*): mutmut copies only the package's files\n"
            'also_copy = ["experiments", "profiles", "traces", "tests", "examples", "flamingo_sim/data"]\n'
            f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
            "# the slow tests too: FedBuff's runs are slow tests (mutmut runs, per mutant, only the tests that reach it)\n"
            f"pytest_add_cli_args = {json.dumps(['-p', 'no:cacheprovider', '-m', 'slow or not slow', '-q', *deselect])}\n")


def module_of(mutant: str) -> str:
    """``flamingo_sim.fl.sim.fedbuff.x_f__mutmut_3`` -> ``flamingo_sim.fl.sim.fedbuff`` (mutmut names a function
    ``x_<name>``, a method ``x<Class>ǁ<name>``)."""
    parts = mutant.split("__mutmut_")[0].split(".")
    return ".".join(parts[:-1])


def parse_results(text: str) -> dict[str, str]:
    """mutant name -> status, from ``mutmut results --all true``."""
    return {m.group(1): m.group(2) for line in text.splitlines() if (m := RESULT_LINE.match(line))}


def sample(names: list[str], n: int) -> list[str]:
    """The ``n`` names with the smallest SHA-256: the same names give the same sample on every machine."""
    return sorted(sorted(names, key=lambda s: hashlib.sha256(s.encode()).hexdigest())[:n])


def summarise(statuses: dict[str, str]) -> dict[str, dict[str, float | int]]:
    """Per module: mutants, killed, survived, no_tests, timeout, other, and score = killed / (killed + survived)."""
    out: dict[str, dict[str, float | int]] = {}
    for name, status in sorted(statuses.items()):
        row = out.setdefault(module_of(name), {"mutants": 0, "killed": 0, "survived": 0, "no_tests": 0, "timeout": 0, "not_checked": 0, "other": 0})
        row["mutants"] += 1
        key = {"killed": "killed", "survived": "survived", "no tests": "no_tests", "timeout": "timeout", "not checked": "not_checked"}.get(status, "other")
        row[key] += 1
    for row in out.values():
        checked = row["killed"] + row["survived"]
        row["score"] = round(row["killed"] / checked, 3) if checked else float("nan")
    return out


def _copy_checkout(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dest / rel)
        else:
            shutil.copy2(src, dest / rel)


def _mutmut(args: list[str], cwd: Path, expect: str | None = None) -> str:
    """Run mutmut in ``cwd``; one line on failure (unless its output holds ``expect``)."""
    done = subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ""})
    if done.returncode != 0 and not (expect and expect in done.stdout + done.stderr):
        said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip() and not SPINNER.match(line)]
        raise SystemExit(f"mutation.py: mutmut {' '.join(args[:2])} exited {done.returncode}:\n" + "\n".join(said[-60:]))
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="+", help=f"groups ({', '.join(GROUPS)}) or module paths")
    ap.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    ap.add_argument("--sample", type=int, default=None, metavar="N", help="check only N mutants, drawn deterministically")
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None, help="the copy's folder (default: a new temporary one, removed after)")
    ap.add_argument("--recheck", type=Path, default=None, metavar="RESULTS.json",
                    help="check only the survivors of an earlier run (its results file), on today's tests")
    args = ap.parse_args(argv)
    modules = modules_of(args.targets)
    if importlib_missing("mutmut"):
        raise SystemExit("mutation.py: mutmut is not installed: pip install 'flamingo-sim[mutation]'")
    sys.path.insert(0, str(ROOT))
    from flamingo_sim.provenance import describe, sources_digest, stamp

    command = "python .ci/mutation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    provenance = describe(command=command, sources=modules)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="flamingo-mutation-"))
    try:
        _copy_checkout(work)
        with open(work / "pyproject.toml", "a") as f:
            f.write(mutmut_section(modules))
        chosen: list[str] | None = None
        if args.recheck is not None:
            chosen = sorted(json.loads(args.recheck.read_text())["survivors"])
        if args.sample is None and chosen is None:
            _mutmut(["run", "--max-children", str(args.max_children)], work)
        else:
            # generate every mutant and the test map, check none (a pattern no mutant has), then the sample
            _mutmut(["run", "--max-children", str(args.max_children), "no_such_mutant_*"], work, expect="nothing matches")
            every = sorted(parse_results(_mutmut(["results", "--all", "true"], work)))
            names = sample(every, args.sample) if chosen is None else [n for n in chosen if n in set(every)]
            if chosen is not None and len(names) != len(chosen):
                raise SystemExit(f"mutation.py: {len(chosen) - len(names)} of {args.recheck}'s survivors are no mutants of today's code: "
                                 "the module changed; run it whole")
            _mutmut(["run", "--max-children", str(args.max_children), *names], work)
        statuses = parse_results(_mutmut(["results", "--all", "true"], work))
        if args.sample is not None or chosen is not None:
            statuses = {k: v for k, v in statuses.items() if k in set(names)}
        survivors = {k: _mutmut(["show", k], work).strip() for k, v in sorted(statuses.items()) if v == "survived"}
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    result = {
        "provenance": provenance,
        "tool": f"mutmut {_version('mutmut')}",
        "modules_mutated": modules,
        "tests": {m: TESTS[m] for m in modules},
        "sampled": None if args.sample is None else f"{args.sample} mutants, the smallest SHA-256 of their names",
        "rechecked": None if args.recheck is None else f"the survivors of {args.recheck.name}, on today's tests",
        "modules": summarise(statuses),
        "survivors": survivors,
    }
    args.out.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    # the provenance.json beside it, naming the modules mutated and this script as its sources (issue 50): a module
    # changed since finds the score older than its code
    stamp([args.out], command, record={**provenance, "sources": {**provenance["sources"], **sources_digest([".ci/mutation.py"])}})
    for mod, row in result["modules"].items():
        print(f"{mod:45s} {row['mutants']:5d} mutants  killed {row['killed']:5d}  survived {row['survived']:4d}  "
              f"no tests {row['no_tests']:4d}  timeout {row['timeout']:3d}  score {row['score']}")
    print(f"wrote {args.out}")
    return 0


def importlib_missing(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is None


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    sys.exit(main())
