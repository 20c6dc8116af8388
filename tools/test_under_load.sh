#!/usr/bin/env bash
# `make test` from a fresh clone, several times in a row, with CPU hogs running beside it: the
# suite must stay green on a loaded machine (issue 44). Prints each run's result and time.
#
#   bash tools/test_under_load.sh            # 3 runs, 1 hog (a busy-looping process per hog)
#   bash tools/test_under_load.sh 3 2        # 3 runs, 2 hogs (every core of a 2-core machine)
#
# The clone is made from this repository's HEAD in a temporary folder (removed at the end), so
# what is tested is what is committed. The hogs are niced to 0 like the suite: they compete.
set -euo pipefail
runs=${1:-3}
hogs=${2:-1}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
work=$(mktemp -d)
pids=()
stop() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap stop EXIT
git clone --quiet "$repo" "$work/course"
for _ in $(seq "$hogs"); do
    python3 -c 'while True: pass' &
    pids+=("$!")
done
echo "$hogs CPU hog(s) running beside the suite; $(nproc) cores; clone of $(git -C "$repo" rev-parse --short HEAD)"
failed=0
for run in $(seq "$runs"); do
    start=$(date +%s)
    if (cd "$work/course" && make test >"$work/run$run.log" 2>&1); then
        result=passed
    else
        result=FAILED
        failed=1
        cp "$work/run$run.log" "/tmp/test_under_load_run$run.log"
    fi
    echo "run $run: $result in $(( $(date +%s) - start )) s ($(grep -Eo '[0-9]+ (passed|failed)[^=]*' "$work/run$run.log" | tail -1))"
done
[ "$failed" = 0 ] || echo "the logs of the failed runs: /tmp/test_under_load_run*.log"
exit "$failed"
