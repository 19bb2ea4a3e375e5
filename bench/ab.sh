#!/usr/bin/env bash
# Interleaved A/B runs: graph-bench once per value of one environment variable, round after round, so
# that the machine's drift falls on every value alike. One summary line per run (bench/ab_summary.py);
# the raw JSON lines stay in $RESULTS (default target/bench-ab).
#
#   bench/ab.sh ROUNDS VAR "VALUE..." [graph-bench arguments]
#   bench/ab.sh 3 GRAPH_BENCH_SQLITE_PAGE "4096 2048 1024" --workloads durable_sqlite,concurrent_sqlite --repeat 3
#
# Builds the release binary first (features from $FEATURES, e.g. FEATURES=postgres,mysql). Each run gets a
# fresh directory under $TMPDIR for its stores.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
    sed -n '2,9p' "$0" >&2
    exit 2
fi
ROUNDS=$1 VAR=$2 VALUES=$3
shift 3
RESULTS=${RESULTS:-target/bench-ab}
TARGET=${CARGO_TARGET_DIR:-target}
mkdir -p "$RESULTS"
cargo build --release -p graph-bench ${FEATURES:+--features "$FEATURES"}
for round in $(seq "$ROUNDS"); do
    for value in $VALUES; do
        work=$(mktemp -d)
        out="$RESULTS/$VAR=$value-round$round.jsonl"
        if ! env "$VAR=$value" "$TARGET/release/graph-bench" --dir "$work" "$@" > "$out"; then
            rm -rf "$work"
            echo "graph-bench failed with $VAR=$value (round $round)" >&2
            exit 1
        fi
        rm -rf "$work"
        python3 bench/ab_summary.py "$VAR=$value round $round" "$out"
    done
done
