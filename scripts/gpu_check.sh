#!/usr/bin/env bash
# The GPU checks, in one go, on a lent GPU machine (see ../shared/GPU.md): the gpu-marked tests, the
# headless CLI on real CUDA, the timing-fidelity benchmark (CUDA and CPU), and screenshots of the TUI.
# Usage there: bash scripts/gpu_check.sh OUTDIR   (wheels for Textual & co. installed beforehand)
set -uo pipefail
out=${1:?output folder}
mkdir -p "$out/shots"
export TORCHPERF_HISTORY="$out/history.jsonl" PYTHONUNBUFFERED=1
run() { echo; echo "\$ torchperf-tui $*"; timeout 120 python3 -m torchperf_tui "$@" 2>&1; echo "(exit $?)"; }
{
  nvidia-smi -L
  python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
  echo; echo "== gpu tests"; timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tail -15
  echo; echo "== headless CLI"
  run info
  run bench resnet50 --device cuda --batch 32 --iters 100
  run bench resnet50 --device cuda --batch 32 --iters 100 --cudnn-benchmark
  run bench resnet50 --device cuda --batch 32 --iters 100 --dtype float16 --channels-last --cudnn-benchmark
  run bench resnet50 --device cuda --input 1x3x1x1
  run throughput resnet18 --device cuda --max-batch 2048
  run profile resnet50 --device cuda --batch 8 --top 12 --trace /tmp/trace.json
  run roofline resnet50 --device cuda --batch 64 --dtype float16 --iters 50
  run determinism resnet18 --device cuda --deterministic
  run history --last 3
  echo; echo "== timing fidelity (CUDA)"; timeout 120 python3 bench/timing_fidelity.py --device cuda --rounds 4 2>&1
  echo; echo "== timing fidelity (CPU, 2 threads)"; timeout 150 python3 bench/timing_fidelity.py --rounds 4 2>&1
  echo; echo "== screenshots"
  timeout 150 python3 scripts/make_screenshots.py --model resnet50 --flag cudnn_benchmark --iters 100 \
      --out "$out/shots" 2>&1 | tail -5
  rm -f "$out/shots/layers.svg"
} > "$out/gpu-check.log" 2>&1
echo "log: $out/gpu-check.log"
