#!/usr/bin/env bash
# Instructions and allocations per committed step of the loop workload on the memory store (the event
# log on, no metrics), as figures a noisy machine does not move: callgrind and dhat counts of
# `graph-bench --workloads loop --quick` (runs of 1,000 steps) at `--repeat 1` and `--repeat 2` (4 and 7
# runs); the difference over the 3,000 extra steps is what a step costs, start-up left out. SHA-256
# (sha2's `compress256`) is reported apart with its block count: valgrind has no SHA-NI, so sha2 takes its
# software path there, while on a CPU with SHA extensions it uses them. Prints one JSON object.
#
#   bench/instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p graph-bench
bin=target/release/graph-bench
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in 1 2; do
    GRAPH_BENCH_MODE=memory valgrind --tool=callgrind --callgrind-out-file="$out/cg.$r" \
        "$bin" --workloads loop --quick --repeat "$r" > /dev/null 2>&1
    GRAPH_BENCH_MODE=memory valgrind --tool=dhat --dhat-out-file="$out/dhat.$r" \
        "$bin" --workloads loop --quick --repeat "$r" > /dev/null 2>&1
done
python3 - "$out" <<'EOF'
import json, re, subprocess, sys

out = sys.argv[1]
STEPS = 3 * 1000  # --repeat 2 runs three more loops of 1,000 steps than --repeat 1


def callgrind(r):
    text = subprocess.run(["callgrind_annotate", f"{out}/cg.{r}"], capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text).group(1).replace(",", ""))
    sha = re.search(r"([\d,]+) \(\s*[\d.]+%\)\s+\S*sha2::sha256::compress256", text)
    return total, int(sha.group(1).replace(",", "")) if sha else 0


def dhat(r):
    d = json.load(open(f"{out}/dhat.{r}"))
    return sum(p["tbk"] for p in d["pps"]), sum(p["tb"] for p in d["pps"])


(t1, s1), (t2, s2) = callgrind(1), callgrind(2)
(n1, b1), (n2, b2) = dhat(1), dhat(2)
print(json.dumps({
    "workload": "loop", "mode": "memory", "steps_measured": STEPS,
    "instructions_per_step": round((t2 - t1) / STEPS),
    "instructions_per_step_outside_sha256": round(((t2 - s2) - (t1 - s1)) / STEPS),
    "sha256_software_instructions_per_step": round((s2 - s1) / STEPS),
    "allocations_per_step": round((n2 - n1) / STEPS, 1),
    "bytes_allocated_per_step": round((b2 - b1) / STEPS),
    "tool": "valgrind --tool=callgrind / --tool=dhat",
}))
EOF
