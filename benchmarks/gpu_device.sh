#!/usr/bin/env bash
# The GPU checks of issue 31, as one script for a machine with one CUDA GPU (run from the repository
# root), sized to end within one 10-minute device call (about 560 s): the CUDA tests, the paper's
# round for MobileNetV2 at 224 px and ResNet-34 with every training strategy on a fifth of the round
# (benchmarks/gpu_round.py), and a real `run --device cuda` on packed random data at 224 px
# (benchmarks/gpu_run.py), first with CUDA graphs and bf16, then with `auto`. Results go to $OUT
# (default: gpu-results/). Uses the machine's own python3 and torch: nothing is installed.
set -uo pipefail
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/nvidia.txt"
python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__, torch.cuda.get_device_name(0))" 2>&1 | tee -a "$OUT/nvidia.txt"
# the CUDA tests: every test id with its outcome, the commit and the machine in $OUT/cuda_tests.json (copy it to
# benchmarks/results/cuda_tests_<gpu>.json with its provenance.json entry). The device machine's tree is a copy
# without git: FLAMINGO_SIM_COMMIT names the commit (default: git's HEAD where there is one).
export FLAMINGO_SIM_COMMIT=${FLAMINGO_SIM_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
TESTS_CMD='python3 -m pytest -q -p no:cacheprovider -m "slow or not slow" -k "cuda or gpu or bf16" tests/fl/training'
timeout "${TESTS_S:-60}" python3 -m pytest -q -p no:cacheprovider -m "slow or not slow" -k "cuda or gpu or bf16" \
    --junitxml "$OUT/cuda_tests.xml" tests/fl/training 2>&1 | tee "$OUT/cuda_tests.txt"
python3 .ci/junit_results.py "$OUT/cuda_tests.xml" "$OUT/cuda_tests.json" --command "$TESTS_CMD" 2>&1 | tee -a "$OUT/cuda_tests.txt"
timeout "${ROUND_S:-150}" python3 benchmarks/gpu_round.py --device cuda --paper --bf16 --rows 1,3 --clients 20 --loop-clients 5 \
    --repeats 1 --json "$OUT/gpu_round.json" 2>&1 | tee "$OUT/gpu_round.txt"
RUN="--device cuda --clients 200 --samples 16 --rounds 2"
timeout "${GRAPH_S:-150}" python3 benchmarks/gpu_run.py $RUN --set fl.train_mode=vmap --set fl.cuda_graphs=true \
    --set fl.precision=bf16 --json "$OUT/gpu_run_graph_bf16.json" 2>&1 | tee "$OUT/gpu_run_graph_bf16.txt"
timeout "${AUTO_S:-200}" python3 benchmarks/gpu_run.py $RUN --json "$OUT/gpu_run_auto.json" 2>&1 | tee "$OUT/gpu_run_auto.txt"
echo "done"
