#!/usr/bin/env bash
# The project's GPU check: every CUDA and NVML path, in one call of under 8 minutes on a lent GPU machine
# (../shared/GPU.md says what is there). Run it first whenever a GPU is lent, and record what it printed.
#
#   bash scripts/gpu_check.sh OUT [SECTION...]      (default: every section, in the order below)
#   GPU_CHECK_BUDGET=SECONDS   the whole check's time (default 450); a section that would not fit is skipped, and
#                              the summary says so
#   GPU_CHECK_DRY_RUN=1        print every command instead of running it (the suite checks the script this way)
#
# Sections, in the order they run (the open work's first):
#   env        the GPU, torch, and `info` (real NVML: clocks, power, the peaks)
#   tests      the tests marked gpu
#   why        resnet50 in float32 at batch 32: the advisor's findings (TF32, channels_last, bfloat16 from the
#              ceilings it measures first, with the transfer ceilings; GPM), the top three fixes measured
#   capacity   resnet50: the largest batch whose p99 stays within 50 ms (the frontier), and a timed run's other
#              tenants, PCIe link, GPM counters and input copy (info's topology and PCIe are env's)
#   attention  a small llama in bfloat16 at sequence 1024: SDPA math, efficient and cuDNN against flash, each an
#              interleaved A/B with its verdict; the kernel each ran; a real fallback (float32, flash and math allowed:
#              math ran, "dtype float32")
#   flags      resnet50 at batch 32: TF32 off against on, cudnn.benchmark off against on, and the conv kernels each ran
#   generate   generation on the small llama: TTFT, per-token latency, the KV cache
#   sweep      the sequence sweep of math against flash on CUDA: latency and the allocator's peak per length
#   exporter   `torchperf-tui exporter` on the real NVML: /metrics scraped, the DCGM names it serves
#   shots      the demo's GPU variant headless (the attention story: screenshots at 100x30 and 80x24) and the main
#              views on resnet50
# OUT then holds at most 8 files, none deeper than OUT itself: summary.txt (each command, its exit code, its time
# and the lines that carry a verdict), logs.tar.gz (every section's whole log, the history and the ceilings kept) and
# shots.tar.gz (the screenshots).
set -uo pipefail
out=${1:?usage: bash scripts/gpu_check.sh OUT [SECTION...]}; shift
all_sections=(env tests why capacity attention flags generate sweep exporter shots)  # the open work first
sections=("$@"); [ ${#sections[@]} -gt 0 ] || sections=("${all_sections[@]}")
# The least time a section needs to be worth starting (each command has its own limit besides, cut to what is left).
declare -A least=([env]=10 [tests]=60 [attention]=60 [sweep]=40 [flags]=60 [why]=60 [capacity]=45 [generate]=20
                  [exporter]=15 [shots]=90)
for section in "${sections[@]}"; do
  if [ -z "${least[$section]:-}" ]; then
    echo "gpu_check.sh: unknown section '$section' (the sections: ${all_sections[*]})" >&2; exit 2
  fi
done
budget=${GPU_CHECK_BUDGET:-450}
case $budget in ''|*[!0-9]*) echo "gpu_check.sh: GPU_CHECK_BUDGET is a whole number of seconds, not '$budget'" >&2; exit 2 ;; esac
dry=${GPU_CHECK_DRY_RUN:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/logs" "$work/shots"
summary="$out/summary.txt"
export TORCHPERF_HISTORY="$work/logs/history.jsonl" TORCHPERF_CEILINGS="$work/logs/ceilings.json"
export PYTHONUNBUFFERED=1
start=$SECONDS

# The small llama of the attention story (app/demo_attention.py's SMALL_CONFIGS): two layers of width 256.
LLAMA=(hf:llama --model-args "num_hidden_layers=2,hidden_size=256,intermediate_size=512,num_attention_heads=4,num_key_value_heads=4,vocab_size=2048,max_position_embeddings=4096"
       --device cuda)
R50=(resnet50 --device cuda --batch 32)

left() { echo $((budget - (SECONDS - start))); }

# Lines of a command's output that carry its result: verdicts, what ran, fallbacks, the failure's one line.
verdict_lines() {
  grep -E -i 'faster|slower|no significant|ran |fallback|passed over|error|refused|p50|ttft|per token|busy|'\
'peak|GiB|MiB|TFLOP|DCGM_FI|passed|failed|skipped|THROTTL|disturbed|noisy' | head -n 12
}

# One command, with its own time limit (cut to what is left of the budget): its output into the section's log, its
# exit code and the lines of its result into the summary.
step() {
  local seconds=$1; shift
  local t0=$SECONDS tmp="$work/step.out" rc shown
  shown=$(printf '%q ' "$@")
  echo "\$ $shown" >>"$log"
  if [ "$dry" = 1 ]; then
    echo "  \$ $shown" >>"$summary"; return 0
  fi
  if [ "$(left)" -lt 5 ]; then
    echo "  \$ $shown"$'\n'"    not run: the budget is spent" >>"$summary"; return 0
  fi
  [ "$(left)" -lt "$seconds" ] && seconds=$(left)
  timeout --kill-after=10 "$seconds" "$@" >"$tmp" 2>&1; rc=$?
  cat "$tmp" >>"$log"
  echo "(exit $rc, $((SECONDS - t0)) s)" >>"$log"
  { echo "  \$ $shown"; echo "    exit $rc in $((SECONDS - t0)) s$([ $rc = 124 ] && echo ": ran past its $seconds s")"
    verdict_lines <"$tmp" | sed 's/^/    | /'; } >>"$summary"
  return $rc
}
tui() { local seconds=$1; shift; step "$seconds" python3 -m torchperf_tui "$@"; }

check_env() {
  step 10 nvidia-smi -L
  step 20 python3 -c "import torch, torchvision, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"
  tui 30 info
}
check_tests() {
  # pytest-xdist is not on the GPU machine: the project's addopts (-n 4) are set aside
  step 115 python3 -m pytest -q -o addopts= -m gpu -p no:cacheprovider tests
}
check_attention() {
  local bf16=("${LLAMA[@]}" --dtype bfloat16 --seq-len 1024 --blocks 6 --time-budget 25 --no-history)
  tui 40 compare "${bf16[@]}" --a sdpa=math --b sdpa=flash
  tui 40 compare "${bf16[@]}" --a sdpa=efficient --b sdpa=flash
  tui 40 compare "${bf16[@]}" --a sdpa=cudnn --b sdpa=flash
  tui 40 compare "${LLAMA[@]}" --dtype bfloat16 --seq-len 1024 --kernels --a sdpa=math --b sdpa=flash
  # the fallback: float32, which flash does not take, with math allowed beside it
  tui 40 compare "${LLAMA[@]}" --seq-len 1024 --kernels --a sdpa=math --b sdpa=flash+math
}
check_sweep() {
  tui 65 sweep "${LLAMA[@]}" --dtype bfloat16 --seq-lens 256-4096 --a sdpa=math --b sdpa=flash --time-budget 45
}
check_flags() {
  local ab=("${R50[@]}" --blocks 6 --time-budget 25 --no-history)
  tui 40 compare "${ab[@]}" --a tf32=off --b tf32=on
  tui 40 compare "${ab[@]}" --a cudnn_benchmark=off --b cudnn_benchmark=on
  tui 40 compare resnet50 --device cuda --batch 8 --kernels --a cudnn_benchmark=off --b cudnn_benchmark=on
}
check_why() {
  tui 40 ceilings --device cuda
  tui 100 why "${R50[@]}" --budget 90 --verify 3 --no-history
}
check_capacity() {
  tui 70 throughput resnet50 --device cuda --slo p99=50ms --time-budget 60
  tui 40 bench "${R50[@]}" --iters 100 --no-history
}
check_generate() {
  tui 35 bench "${LLAMA[@]}" --dtype bfloat16 --seq-len 128 --generate 64 --time-budget 15
}
check_exporter() {
  local port=9477
  if [ "$dry" = 1 ]; then step 1 python3 -m torchperf_tui exporter --port $port; return; fi
  python3 -m torchperf_tui exporter --port $port --interval 0.5 >"$work/logs/exporter.out" 2>&1 &
  local pid=$!
  step 20 python3 - "$port" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/metrics"
for _ in range(60):
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        break
    except OSError:
        time.sleep(0.25)
else:
    sys.exit(f"nothing served at {url}")
names = sorted({line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")})
print(len(names), "metrics served:", " ".join(n for n in names if n.startswith("DCGM_FI")))
print("\n".join(line for line in text.splitlines() if line.startswith(("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE"))))
PY
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  cat "$work/logs/exporter.out" >>"$log"
}
check_shots() {
  step 110 python3 scripts/make_screenshots.py --only attention --attention-config demo --out "$work/shots"
  step 85 python3 scripts/make_screenshots.py --only main --model resnet50 --flag cudnn_benchmark --iters 60 \
      --sizes 100x30 --out "$work/shots"
}

echo "torchperf-tui GPU check, $(date -u '+%F %T UTC'), budget ${budget} s, sections: ${sections[*]}" >"$summary"
for section in "${sections[@]}"; do
  log="$work/logs/$section.log"
  if [ "$(left)" -lt "${least[$section]}" ]; then
    echo "== $section: skipped, $(left) s left of the budget (it needs ${least[$section]} s)" >>"$summary"
    continue
  fi
  echo "== $section ($(date -u +%T), $(left) s left)" >>"$summary"
  t0=$SECONDS
  "check_$section"
  echo "   $section took $((SECONDS - t0)) s" >>"$summary"
done
echo "== done in $((SECONDS - start)) s" >>"$summary"
tar -czf "$out/logs.tar.gz" -C "$work" logs
if [ -n "$(ls -A "$work/shots")" ]; then tar -czf "$out/shots.tar.gz" -C "$work" shots; fi
cat "$summary"
