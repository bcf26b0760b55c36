#!/usr/bin/env bash
# The GPU checks on a lent GPU machine (see ../shared/GPU.md), in sections that each fit one `device` call:
#   tests     the gpu-marked tests
#   cli       the headless CLI on real CUDA (bench, throughput, profile, roofline, determinism, history)
#   fidelity  the engine's timing against torch.utils.benchmark (CUDA)
#   threads   the kernels view, memsnap and the per-arm threads of an A/B (cudnn.benchmark on varying shapes)
#   train     issue 13: a resnet50 training step at batch 32: benchmark off vs on, deterministic off vs on
#             with the gradient determinism check, AMP fp16/bf16 vs fp32, the training kernels, memsnap,
#             throughput, profile and roofline of a training step
#   train_more  AMP at batch 128 (past launch-bound), the gradient determinism check under cudnn.benchmark,
#             AMP, and on a model with a non-deterministic backward (bilinear upsampling), the kernels' names
#   train_bench bench/train_step.py: the engine's training step against torch.utils.benchmark
#   modes     issue 14: resnet18 and resnet50 at batch 1 and 64 in every timing mode, a cold L2, a training
#             step's modes, bench/timing_modes.py
#   layers    issue 14: time per layer and GPU busy/idle (roofline --layers) for resnet18 and resnet50 at batch 1
#             and 64 and a training step, bench/layer_times.py, and the why screenshots (time per layer, modes)
#   ceilings  issue 14: the measured ceilings (matmul per dtype, copy), a roofline against them, bench/ceilings.py
#   conditions issue 14: clocks, throttle reasons, temperature, power and energy per inference beside a run:
#             resnet50 at batch 64 for 30 s (long enough to heat up), an A/B, the timing modes and a throughput
#             search with their per-arm, per-mode and best-batch conditions, --json's conditions, the history
#             record's fingerprint
#   shots     screenshots of the TUI on CUDA (the usual views and the training views), and the TUI's fidelity
# Usage there: bash scripts/gpu_check.sh OUTDIR [SECTION...]   (default: all; Textual & co. installed first)
# Each section writes OUTDIR/SECTION.log; the screenshots go to OUTDIR/shots.
set -uo pipefail
out=${1:?output folder}; shift
sections=${*:-tests cli fidelity threads train train_more train_bench modes layers ceilings conditions shots}
mkdir -p "$out/shots"
export TORCHPERF_HISTORY="$out/history.jsonl" PYTHONUNBUFFERED=1
run() { echo; echo "\$ torchperf-tui $*"; local t0=$SECONDS
        timeout 180 python3 -m torchperf_tui "$@" 2>&1; echo "(exit $?, $((SECONDS - t0)) s)"; }
r50=(resnet50 --device cuda --batch 32)

tests() {
  timeout 300 python3 -m pytest -q -n 0 -m gpu -p no:cacheprovider tests 2>&1 | tail -25
}
cli() {
  run info
  run bench "${r50[@]}" --iters 100
  run bench "${r50[@]}" --iters 100 --cudnn-benchmark
  run bench "${r50[@]}" --iters 100 --dtype float16 --channels-last --cudnn-benchmark
  run bench resnet50 --device cuda --input 1x3x1x1
  run throughput resnet18 --device cuda --max-batch 2048
  run profile resnet50 --device cuda --batch 8 --top 12 --trace /tmp/trace.json
  run roofline resnet50 --device cuda --batch 64 --dtype float16 --iters 50
  run determinism resnet18 --device cuda --deterministic
  run history --last 3
}
fidelity() {
  timeout 240 python3 bench/timing_fidelity.py --device cuda --rounds 4 2>&1
}
threads() {
  run compare resnet18 --device cuda --batch 16 --a "" --b cudnn_benchmark=on --kernels
  run compare resnet18 --device cuda --batch 8 --a "" --b cudnn_benchmark=on --shapes cycle:4:160-224 --blocks 6
  run compare resnet18 --device cuda --batch 8 --a "" --b cudnn_benchmark=on --blocks 6
  run memsnap resnet50 --device cuda --batch 8
}
train() {
  run bench "${r50[@]}" --step train --iters 50
  run compare "${r50[@]}" --step train --a "" --b cudnn_benchmark=on
  run compare "${r50[@]}" --step train --a "" --b deterministic=on
  run determinism "${r50[@]}" --step train
  run determinism "${r50[@]}" --step train --deterministic
  run compare "${r50[@]}" --step train --a "" --b amp=fp16
  run compare "${r50[@]}" --step train --a "" --b amp=bf16
  run compare "${r50[@]}" --step train --a "" --b cudnn_benchmark=on --kernels
  run memsnap resnet50 --device cuda --batch 32 --step train
  run throughput resnet50 --device cuda --step train --max-batch 512
  run profile "${r50[@]}" --step train --top 10
  run roofline "${r50[@]}" --step train --amp bf16 --iters 30
}
train_more() {
  run compare resnet50 --device cuda --batch 128 --step train --a "" --b amp=bf16 --blocks 6
  run compare resnet50 --device cuda --batch 128 --step train --a "" --b amp=fp16 --blocks 6
  run determinism "${r50[@]}" --step train --cudnn-benchmark
  run determinism "${r50[@]}" --step train --amp fp16
  # bilinear upsampling's backward accumulates with atomics on CUDA: non-deterministic by design
  run determinism lraspp_mobilenet_v3_large --device cuda --batch 8 --step train
  run determinism lraspp_mobilenet_v3_large --device cuda --batch 8 --step train --deterministic-algorithms
  run compare resnet18 --device cuda --batch 16 --a "" --b cudnn_benchmark=on --kernels
}
train_bench() {
  timeout 300 python3 bench/train_step.py --device cuda --model resnet50 --batch 32 --input 3x224x224 \
      --rounds 4 --iters 20 --min-run-time 1.0 2>&1
}
modes() {
  for model in resnet18 resnet50; do for batch in 1 64; do
    run bench $model --device cuda --batch $batch --modes sync,pipelined,graph --iters 60
  done; done
  run bench resnet18 --device cuda --batch 1 --modes sync,pipelined,graph --iters 60 --cold-l2
  run bench resnet50 --device cuda --batch 64 --modes sync,pipelined,graph --iters 60 --cold-l2
  run bench resnet50 --device cuda --batch 32 --modes sync,pipelined,graph --iters 30 --step train
  echo; echo "== bench/timing_modes.py"
  timeout 200 python3 bench/timing_modes.py --device cuda --models resnet18 resnet50 --rounds 3 2>&1
}
layers() {
  for model in resnet18 resnet50; do for batch in 1 64; do
    run roofline $model --device cuda --batch $batch --iters 30 --layers
  done; done
  run roofline resnet50 --device cuda --batch 32 --iters 20 --layers --step train
  echo; echo "== bench/layer_times.py"
  timeout 200 python3 bench/layer_times.py --device cuda --batch 1 64 --models resnet18 resnet50 --rounds 2 2>&1
  timeout 120 python3 bench/layer_times.py --device cuda --batch 32 --models resnet50 --step train --rounds 2 2>&1
  timeout 120 python3 scripts/make_screenshots.py --only why --model resnet50 --iters 60 --out "$out/shots" 2>&1 | tail -3
}
ceilings() {
  run ceilings --device cuda --refresh
  run roofline resnet50 --device cuda --batch 64 --dtype float16 --iters 30
  echo; echo "== bench/ceilings.py"
  timeout 120 python3 bench/ceilings.py --device cuda --rounds 3 2>&1
}
conditions() {
  run bench resnet50 --device cuda --batch 64 --iters 3000 --time-budget 30
  run bench resnet18 --device cuda --batch 1 --iters 2000
  run compare resnet50 --device cuda --batch 32 --a cudnn_benchmark=off --b cudnn_benchmark=on --blocks 8
  run bench resnet18 --device cuda --batch 64 --modes sync,pipelined,graph
  run throughput resnet50 --device cuda --max-batch 512
  # not through run(): its '$ torchperf-tui ...' header line would go down the pipe ahead of the JSON
  echo; echo "== bench --json's conditions"
  timeout 180 python3 -m torchperf_tui bench resnet18 --device cuda --batch 8 --iters 300 --json | python3 -c \
      "import json, sys; print(json.dumps(json.load(sys.stdin)['conditions'], indent=1))"
  echo; echo "== the history record's fingerprint"
  tail -n 1 "$TORCHPERF_HISTORY" | python3 -c \
      "import json, sys; f = json.loads(sys.stdin.read())['fingerprint']; print({k: v for k, v in f.items() if k.startswith('gpu_')})"
}
shots() {
  timeout 200 python3 scripts/make_screenshots.py --model resnet50 --flag cudnn_benchmark --iters 100 \
      --out "$out/shots" 2>&1 | tail -5
  timeout 200 python3 scripts/make_screenshots.py --only training --model resnet50 --flag cudnn_benchmark \
      --iters 30 --out "$out/shots" 2>&1 | tail -5
  echo; echo "== the TUI's timing against the CLI's"
  timeout 150 python3 bench/tui_fidelity.py --models resnet50 --rounds 2 2>&1
}

for section in $sections; do
  { echo "== $section ($(date -u +%T))"; [ "$section" = tests ] && nvidia-smi -L
    python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
    "$section"; echo "== $section done ($(date -u +%T))"; } > "$out/$section.log" 2>&1
  echo "$section: $out/$section.log"
done
