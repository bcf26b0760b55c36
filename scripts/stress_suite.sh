#!/usr/bin/env bash
# Run the README's test command N times in a row (default 5) with two CPU burners beside it, as on a busy
# 2-core CI box: each run's pytest summary line, then "K of N green". Exits non-zero if any run failed.
#
#   scripts/stress_suite.sh [N] [extra pytest arguments...]
#   scripts/stress_suite.sh 5 | tee bench/results/stress_suite.txt
#
# PYTHON picks the interpreter (default .venv/bin/python of the repository); BURNERS the number of burners
# (default 2). Each run's whole output is kept under $STRESS_LOGS (default a fresh temp folder, named at the end).
set -u

cd "$(dirname "$0")/.."
runs="${1:-5}"
shift $(( $# > 0 ? 1 : 0 ))
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
    echo "stress_suite.sh: N must be a whole number of runs, at least 1 (got '$runs')" >&2
    exit 2
fi
python="${PYTHON:-.venv/bin/python}"
burners="${BURNERS:-2}"
logs="${STRESS_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/stress_suite.XXXXXX")}"
mkdir -p "$logs"

pids=()      # the burners
suite_pid=""  # the run under way: pytest runs in the background so that a signal reaches the trap at once
stop_all() {
    [[ -n "$suite_pid" ]] && kill "$suite_pid" 2>/dev/null
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${pids[@]}" $suite_pid; do
        wait "$pid" 2>/dev/null
    done
    pids=()
    suite_pid=""
}
trap stop_all EXIT
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM HUP

# The project's modules compiled first, as scripts/install.sh does on the README's way to the suite: where
# PYTHONDONTWRITEBYTECODE is set (this workplace sets it), every process the suite starts, each measurement process
# among them, would otherwise compile them from source (~0.7 s of CPU a process on the 2-core box).
env -u PYTHONDONTWRITEBYTECODE "$python" -m compileall -q tui tests >/dev/null

for _ in $(seq "$burners"); do
    python3 -c "while True: pass" &
    pids+=("$!")
done
echo "$(date '+%F %T') $burners CPU burners (pids ${pids[*]}) on $(nproc) cores; $runs runs of: $python -m pytest $*"

green=0
for i in $(seq "$runs"); do
    log="$logs/run_$i.txt"
    started=$(date +%s)
    "$python" -m pytest "$@" >"$log" 2>&1 &
    suite_pid=$!
    wait "$suite_pid"
    code=$?
    suite_pid=""
    summary=$(grep -E '(passed|failed|errors?|no tests ran).* in [0-9.]+s' "$log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')
    [[ -n "$summary" ]] || summary="(no summary line; exit $code)"
    echo "run $i/$runs: exit $code in $(( $(date +%s) - started )) s: $summary"
    if [[ $code -eq 0 ]]; then
        green=$((green + 1))
    else
        grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /'
    fi
done

echo "$green of $runs green (logs: $logs)"
[[ $green -eq $runs ]]
