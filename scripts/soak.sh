#!/usr/bin/env bash
# Runs one test target of graph-tests again and again and keeps the output of every failing run: how
# the rare failures of the fault tests (a kill landing inside a store's first open, inside a commit
# group's write) were reproduced. With --load, a busy loop takes one core for the whole soak: a slower
# child stretches the windows a SIGKILL can land in.
#
#   scripts/soak.sh <test target> <runs> [--load] [filter]   e.g. scripts/soak.sh faults 100 --load effects_crash::
#
# Logs of failing runs: target/soak/<test>-<n>.log; a line per run on stdout; exit 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
test_name=${1:?usage: scripts/soak.sh <test target> <runs> [--load] [filter]}
runs=${2:?usage: scripts/soak.sh <test target> <runs> [--load] [filter]}
load=${3:-}
filter=${4:-}
if [ "$load" != "--load" ]; then filter=$load; load=; fi
exe=$(cargo test -p graph-tests --test "$test_name" --no-run 2>&1 | sed -n 's/.*Executable [^(]*(\(.*\)).*/\1/p' | tail -1)
[ -x "$exe" ] || { echo "no test executable for $test_name" >&2; exit 2; }
mkdir -p target/soak
busy=
if [ "$load" = "--load" ]; then
    sh -c 'while :; do :; done' & busy=$!
fi
trap '[ -n "$busy" ] && kill "$busy" 2>/dev/null || true' EXIT
failed=0
for i in $(seq 1 "$runs"); do
    log=target/soak/$test_name-$i.log
    # shellcheck disable=SC2086 # no filter: every test of the target
    if "$exe" --nocapture $filter > "$log" 2>&1; then
        rm "$log"
        echo "$i ok"
    else
        failed=$((failed + 1))
        echo "$i FAILED: $log"
    fi
done
echo "$test_name: $failed of $runs runs failed"
[ "$failed" -eq 0 ]
