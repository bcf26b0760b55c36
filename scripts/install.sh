#!/bin/sh
# Install torchperf-tui into a virtual environment (.venv, or $VENV) with the torch build that fits this box:
# the CUDA build where an NVIDIA GPU is present (PyPI's torch), else the CPU-only build from PyTorch's CPU
# index (a few hundred MB instead of the CUDA wheels' 5.6 GB). On a CPU box torch and torchvision are installed
# first, from that index alone (--index-url, PyTorch's documented way, within pyproject.toml's ranges), then the
# project from PyPI, which keeps them: with --extra-index-url pip would take the highest version of either
# index, and a PyPI release ahead of the CPU index would bring back the CUDA build. Where that index cannot be
# reached, pip installs from PyPI alone (on Linux, the CUDA build) and this says so, naming the mirror setting.
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
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
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

# An argument as a shell would need it typed ('torch>=2.4', '.[test]'), so a printed command can be pasted.
quoted() {
    case $1 in
        *[!A-Za-z0-9_./:=@%+,-]*|'') printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
        *) printf '%s' "$1" ;;
    esac
}

run() {
    line="+"
    for arg in "$@"; do
        line="$line $(quoted "$arg")"
    done
    echo "$line"
    if [ "$dry_run" -eq 0 ]; then
        "$@"
    fi
}

# torch's and torchvision's requirements as pyproject.toml declares them ('torch>=2.4'), one a line; the bare
# name where it declares none.
torch_requirements() {
    "$PYTHON" - <<'PY'
import re

text = open("pyproject.toml", encoding="utf-8").read()
block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.S | re.M)
declared = re.findall(r"[\"']([^\"']+)[\"']", block.group(1)) if block else []
for name in ("torch", "torchvision"):
    found = [r.strip() for r in declared if re.match(rf"{name}\s*($|[<>=!~;\[(])", r.strip())]
    print(found[0] if found else name)
PY
}

cpu_index=""
if has_nvidia_gpu; then
    echo "install.sh: an NVIDIA GPU is present: torch's CUDA build (from PyPI)"
elif index_reachable; then
    echo "install.sh: no NVIDIA GPU: torch's CPU-only build (from $CPU_INDEX)"
    cpu_index=$CPU_INDEX
else
    echo "install.sh: warning: no NVIDIA GPU, and $CPU_INDEX cannot be reached: torch comes from PyPI alone" \
         "(on Linux, the CUDA build: about 5.6 GB); for the CPU build from a mirror, set" \
         "TORCHPERF_TORCH_CPU_INDEX to its URL and run this again" >&2
fi

run "$PYTHON" -m venv "$VENV"
if [ -n "$cpu_index" ]; then
    requirements=$(torch_requirements)
    old_ifs=$IFS
    IFS='
'
    set -- $requirements
    IFS=$old_ifs
    run "$VENV/bin/pip" install "$@" --index-url "$cpu_index"
fi
run "$VENV/bin/pip" install -e "$target"
# The project's own modules compiled once (with the tests' with --test): an editable install leaves them as sources,
# and where PYTHONDONTWRITEBYTECODE is set every process (the app, each measurement process) would compile them again.
sources=tui
[ "$target" = . ] || sources="tui tests"
run env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" -m compileall -q $sources
