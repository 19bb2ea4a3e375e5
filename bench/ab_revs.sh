#!/usr/bin/env bash
# Interleaved A/B runs of two revisions: graph-bench built at each (a git worktree and a target
# directory of its own under $WORK), then run alternately, round after round, so that the machine's
# drift falls on both alike. One summary line per run (bench/ab_summary.py); the raw JSON lines stay in
# $RESULTS (default target/bench-ab-revs).
#
#   bench/ab_revs.sh REV_A REV_B ROUNDS [graph-bench arguments]
#   bench/ab_revs.sh c5250ec HEAD 3 --workloads loop,fanout,durable,concurrent --repeat 3
#
# Features from $FEATURES (e.g. FEATURES=postgres,mysql); $WORK defaults to target/ab-revs.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
    sed -n '2,10p' "$0" >&2
    exit 2
fi
A=$1 B=$2 ROUNDS=$3
shift 3
ROOT=$PWD
RESULTS=${RESULTS:-$ROOT/target/bench-ab-revs}
WORK=${WORK:-$ROOT/target/ab-revs}
mkdir -p "$RESULTS" "$WORK"
for rev in "$A" "$B"; do
    sha=$(git rev-parse --short "$rev")
    tree="$WORK/tree-$sha"
    [ -d "$tree" ] || git worktree add --detach "$tree" "$sha" >&2
    (cd "$tree" && CARGO_TARGET_DIR="$WORK/target-$sha" cargo build --release -p graph-bench \
        ${FEATURES:+--features "$FEATURES"} >&2)
done
for round in $(seq "$ROUNDS"); do
    for rev in "$A" "$B"; do
        sha=$(git rev-parse --short "$rev")
        dir=$(mktemp -d)
        out="$RESULTS/$sha-round$round.jsonl"
        if ! "$WORK/target-$sha/release/graph-bench" --dir "$dir" "$@" > "$out"; then
            rm -rf "$dir"
            echo "graph-bench failed at $rev (round $round)" >&2
            exit 1
        fi
        rm -rf "$dir"
        python3 bench/ab_summary.py "$rev ($sha) round $round" "$out"
    done
done
echo "worktrees and builds are in $WORK: git worktree remove them when done" >&2
