#!/usr/bin/env bash
# The GPU checks of issue 43, as one script for a machine with one CUDA GPU (run from the repository root), sized to
# end within one device call of about 9 minutes: every piece has its own time budget and leaves a results file
# however it ends. Uses the machine's own python3 and torch: nothing is installed.
#
#   bash benchmarks/gpu_device.sh              # on the GPU: results files in benchmarks/results/, named with TAG (h100)
#   bash benchmarks/gpu_device.sh --dry-run    # on a CPU, tiny: every piece, into a temporary folder (tests run this)
#
# The pieces, each a JSON file recording the command, the commit, the machine and the GPU (or CPU) it ran on:
#   1. cuda_tests_$TAG.json    the CUDA tests (-k "cuda or gpu or bf16" in tests/fl/training): each test id, its outcome
#                              and seconds (pytest's JUnit XML, converted);                          budget TESTS_S (60 s)
#   2. gpu_round_$TAG.json     the paper's round (20 steps x batch 16, 10 clients timed) for MobileNetV2 and ShuffleNetV2
#                              x2 at 224 px and ResNet-34 on 32x32 spectrograms: the per-client loop, train_mode auto
#                              (its choice, why, the bound, every candidate as its tuner measured it);  budget ROUND_S (200 s)
#   3. reproduce_real_$TAG.json  reproduce --data-root on random data in FedScale's layouts at 224 px, one round of each
#                              unit on the GPU, and the whole reproduce (3 tasks x 2 policies x 3 seeds x 100 rounds) on
#                              this GPU extrapolated from it;                                        budget ESTIMATE_S (220 s)
# and gpu_device_$TAG.log, everything the pieces printed. OUT (default benchmarks/results) and TAG change where and how
# they are named.
set -uo pipefail
DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; fi
PY=${PYTHON:-python3}
if [ "$DRY" = 1 ]; then
    OUT=${OUT:-$(mktemp -d)}
    TAG=${TAG:-dry}
else
    OUT=${OUT:-benchmarks/results}
    TAG=${TAG:-h100}
fi
TESTS_S=${TESTS_S:-60}
ROUND_S=${ROUND_S:-200}
ESTIMATE_S=${ESTIMATE_S:-220}
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOG="$OUT/gpu_device_$TAG.log"
export PYTHONUNBUFFERED=1 PYTHONPATH=. FLAMINGO_SIM_TUNE_CACHE="$WORK/train_auto.json"
# the device machine's tree is a copy without git: FLAMINGO_SIM_COMMIT names the commit (default: git's HEAD where there is one)
export FLAMINGO_SIM_COMMIT=${FLAMINGO_SIM_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
started=$(date +%s)
say() { echo "== $* ($(( $(date +%s) - started )) s)" | tee -a "$LOG"; }
: > "$LOG"

say "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "no nvidia-smi"; } | tee -a "$LOG"
$PY -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name(0))" 2>&1 | tee -a "$LOG"

say "1. CUDA tests (budget ${TESTS_S} s)"
TESTS=(-m pytest -q -p no:cacheprovider -m "slow or not slow" -k "cuda or gpu or bf16" tests/fl/training)
timeout "$TESTS_S" $PY "${TESTS[@]}" --junitxml="$WORK/cuda_tests.xml" 2>&1 | tee -a "$LOG"
TESTS_RC=${PIPESTATUS[0]}
$PY - "$WORK/cuda_tests.xml" "$OUT/cuda_tests_$TAG.json" "$TESTS_RC" "$(printf '%q ' python3 "${TESTS[@]}")" <<'EOF' 2>&1 | tee -a "$LOG"
import json, platform, subprocess, sys, xml.etree.ElementTree as ET
from pathlib import Path
xml, out, rc, command = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tests = []
if xml.is_file():
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome = next((kind for kind in ("failure", "error", "skipped") if case.find(kind) is not None), "passed")
        outcome = {"failure": "failed"}.get(outcome, outcome)
        tests.append({"id": case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", ""), "outcome": outcome,
                      "seconds": float(case.get("time", 0) or 0)})
import os
commit = os.environ.get("FLAMINGO_SIM_COMMIT", "unknown")
import torch
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
counts = {k: sum(t["outcome"] == k for t in tests) for k in ("passed", "failed", "error", "skipped")}
doc = {"command": command.strip(), "commit": commit, "machine": platform.node(), "gpu": gpu, "torch": torch.__version__, "exit_code": rc,
       "complete": rc != 124 and xml.is_file(), "counts": counts, "tests": tests}
out.write_text(json.dumps(doc, indent=1) + "\n")
print(f"cuda tests: {counts} (exit {rc}{', cut by the budget' if rc == 124 else ''}) -> {out}")
EOF

say "2. the paper round under auto and each candidate (budget ${ROUND_S} s)"
if [ "$DRY" = 1 ]; then
    ROUND=(--device cpu --threads 1 --paper --clients 2 --loop-clients 1 --steps 1 --batch-size 4 --samples 8 --image-divisor 7 --tune)
else
    ROUND=(--device cuda --paper --clients 10 --loop-clients 3)
fi
timeout $((ROUND_S + 30)) $PY benchmarks/gpu_round.py "${ROUND[@]}" --repeats 1 --tuner-only --budget-s "$ROUND_S" \
    --json "$OUT/gpu_round_$TAG.json" 2>&1 | tee -a "$LOG"

say "3. reproduce on real-layout data, and the whole reproduce on this GPU (budget ${ESTIMATE_S} s)"
if [ "$DRY" = 1 ]; then
    EST=(--device cpu --clients 8 --samples 6 --image-size 32 --rounds 1 --participants 2 --steps 1 --batch-size 4)
else
    EST=(--device cuda --clients 200 --samples 16 --image-size 224 --rounds 1)
fi
timeout $((ESTIMATE_S + 30)) $PY benchmarks/reproduce_real.py "${EST[@]}" --budget-s "$ESTIMATE_S" --work "$WORK/real" \
    --json "$OUT/reproduce_real_$TAG.json" 2>&1 | tee -a "$LOG"

say "done: $(ls "$OUT"/*_"$TAG".json 2>/dev/null | tr '\n' ' ')"
