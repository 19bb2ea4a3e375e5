#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ (cargo-fuzz, libFuzzer, on the nightly toolchain), each for SECONDS,
# and prints one line per target: executions, corpus size, crashes.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      # default: 600 s each, every target
#
# The seed corpora (fuzz/corpus/<target>, written by `cargo +nightly run --example seeds` in fuzz/
# from a real store) are read, not changed: what a run finds goes to fuzz/work/<target>. A crash is
# written to fuzz/artifacts/<target>/ and makes the script exit 1; turn each into a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
if ! cargo +nightly fuzz --version > /dev/null 2>&1; then
    cargo +nightly install cargo-fuzz --locked --version 0.13.2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
export CARGO_TERM_PROGRESS_WHEN=never
cargo +nightly fuzz build -O
status=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/work/$t" "fuzz/corpus/$t"
    log="fuzz/work/$t.log"
    if cargo +nightly fuzz run -O "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 > "$log" 2>&1; then
        result=ok
    else
        result="CRASH (see $log and fuzz/artifacts/$t/)"
        status=1
    fi
    runs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1)
    corpus=$(ls "fuzz/work/$t" | wc -l)
    echo "$t: ${seconds} s, ${runs:-?} executions, $corpus new corpus entries, $result"
done
exit $status
