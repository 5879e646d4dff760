#!/usr/bin/env bash
# The GPU checks of issue 31, as one script for a machine with one CUDA GPU (run from the repository
# root): the paper's round for the three networks with every training strategy
# (benchmarks/gpu_round.py), a real `run --device cuda` on packed random data at 224 px
# (benchmarks/gpu_run.py), and the CUDA tests. Results go to $OUT (default: gpu-results/).
# Uses the machine's own python3 and torch: nothing is installed.
set -uo pipefail
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/nvidia.txt"
python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__, torch.cuda.get_device_name(0))" 2>&1 | tee -a "$OUT/nvidia.txt"
timeout "${ROUND_S:-300}" python3 benchmarks/gpu_round.py --device cuda --paper --bf16 --loop-clients 10 --repeats 2 \
    --json "$OUT/gpu_round.json" 2>&1 | tee "$OUT/gpu_round.txt"
timeout "${RUN_S:-170}" python3 benchmarks/gpu_run.py --device cuda --json "$OUT/gpu_run.json" 2>&1 | tee "$OUT/gpu_run.txt"
timeout "${TESTS_S:-60}" python3 -m pytest -q -p no:cacheprovider -m "slow or not slow" -k "cuda or gpu" \
    tests/fl/training 2>&1 | tee "$OUT/cuda_tests.txt"
echo "done"
