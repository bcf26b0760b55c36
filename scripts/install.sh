#!/bin/sh
# Install torchperf-tui into a virtual environment (.venv, or $VENV) with the torch build that fits this box:
# the CUDA build where an NVIDIA GPU is present (PyPI's torch), else the CPU-only build from PyTorch's CPU
# index (a few hundred MB instead of the CUDA wheels' 5.6 GB). Its +cpu versions sort above PyPI's, so pip
# takes them. Where that index cannot be reached, pip installs from PyPI alone (on Linux, the CUDA build) and
# this says so.
#
#   sh scripts/install.sh [--test] [--dry-run]
#     --test     also the test extras ('.[test]')
#     --dry-run  print what would run (and whether a GPU was found), run nothing
#
# $TORCHPERF_TORCH_CPU_INDEX replaces PyTorch's CPU index (a mirror).
# A GPU is found by `nvidia-smi -L` listing one, or by the device node $TORCHPERF_NVIDIA_DEVICE (default
# /dev/nvidia0). $PYTHON (default python3) makes the environment.
set -eu

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
CPU_INDEX=${TORCHPERF_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
DEVICE_NODE=${TORCHPERF_NVIDIA_DEVICE:-/dev/nvidia0}
target=.
dry_run=0
for arg in "$@"; do
    case $arg in
        --test) target='.[test]' ;;
        --dry-run) dry_run=1 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    esac
done

has_nvidia_gpu() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        case $(nvidia-smi -L 2>/dev/null || true) in
            *GPU\ [0-9]*) return 0 ;;
        esac
    fi
    [ -e "$DEVICE_NODE" ]
}

index_reachable() {
    "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)" \
        "$CPU_INDEX" >/dev/null 2>&1
}

run() {
    echo "+ $*"
    if [ "$dry_run" -eq 0 ]; then
        "$@"
    fi
}

extra=""
if has_nvidia_gpu; then
    echo "install.sh: an NVIDIA GPU is present: torch's CUDA build (from PyPI)"
elif index_reachable; then
    echo "install.sh: no NVIDIA GPU: torch's CPU-only build (from $CPU_INDEX)"
    extra=$CPU_INDEX
else
    echo "install.sh: warning: no NVIDIA GPU, and $CPU_INDEX cannot be reached: torch comes from PyPI alone" \
         "(on Linux, the CUDA build: about 5.6 GB)" >&2
fi

run "$PYTHON" -m venv "$VENV"
if [ -n "$extra" ]; then
    run "$VENV/bin/pip" install --extra-index-url "$extra" -e "$target"
else
    run "$VENV/bin/pip" install -e "$target"
fi
