#!/usr/bin/env bash
# Runs the benchmark workloads on graph-runtime and on LangGraph (installed from PyPI into bench/.venv,
# pinned in bench/langgraph/requirements.txt) in one run, on the same file system, and writes
# docs/BENCHMARKS.md. Needs PostgreSQL and MariaDB/MySQL running (see README); bench/instructions.sh
# installs valgrind if it is missing. Takes about 15 minutes and needs ~2 GB free in $TMPDIR (LangGraph's growth run).
#
#   bench/compare.sh            # REPEAT=5 by default: medians of 5 runs
#   REPEAT=3 bench/compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-5}
RESULTS=${RESULTS:-target/bench-results}
TARGET=${CARGO_TARGET_DIR:-target}
mkdir -p "$RESULTS"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

bash bench/langgraph/setup.sh
cargo build --release -p graph-bench --features postgres,mysql
echo "graph-runtime workloads..." >&2
"$TARGET/release/graph-bench" --repeat "$REPEAT" --dir "$WORK" > "$RESULTS/graph-runtime.jsonl"
"$TARGET/release/graph-bench" --repeat "$REPEAT" --dir "$WORK" --workloads durable_sqlite,concurrent_sqlite \
    >> "$RESULTS/graph-runtime.jsonl"
# The server stores, on the local PostgreSQL and MariaDB (GRAPH_BENCH_POSTGRES_URL / GRAPH_BENCH_MYSQL_URL),
# and 1, 2, 4 workers draining submitted runs on each.
"$TARGET/release/graph-bench" --repeat "$REPEAT" --dir "$WORK" --workloads postgres,mysql,workers_postgres,workers_mysql \
    >> "$RESULTS/graph-runtime.jsonl"
# Runs that wait: 100,000 sleeping runs (sled's cache bounded to 64 MiB, then at its default), wake-up
# lateness at 1,000 timers due a second, event delivery on sled and on PostgreSQL.
"$TARGET/release/graph-bench" --dir "$WORK" --workloads sleepers >> "$RESULTS/graph-runtime.jsonl"
GRAPH_BENCH_SLED_CACHE=1073741824 "$TARGET/release/graph-bench" --dir "$WORK" --workloads sleepers \
    >> "$RESULTS/graph-runtime.jsonl"
"$TARGET/release/graph-bench" --dir "$WORK" --workloads wake_lateness,event_latency,event_latency_postgres \
    >> "$RESULTS/graph-runtime.jsonl"
# The inspector: graphctl serve's runs list over 100,000 stored runs.
"$TARGET/release/graph-bench" --dir "$WORK" --workloads inspector >> "$RESULTS/graph-runtime.jsonl"
# Instructions and allocations per loop step: callgrind and dhat counts (bench/instructions.sh).
GRAPH_BENCH_BIN="$TARGET/release/graph-bench" bash bench/instructions.sh >> "$RESULTS/graph-runtime.jsonl"
echo "LangGraph workloads..." >&2
bench/.venv/bin/python bench/langgraph/bench.py --repeat "$REPEAT" --tmp "$WORK" > "$RESULTS/langgraph.jsonl"
python3 bench/report.py "$RESULTS/graph-runtime.jsonl" "$RESULTS/langgraph.jsonl" \
    --command "REPEAT=$REPEAT bench/compare.sh" > docs/BENCHMARKS.md
echo "wrote docs/BENCHMARKS.md (raw results in $RESULTS)" >&2
