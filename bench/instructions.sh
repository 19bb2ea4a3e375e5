#!/usr/bin/env bash
# Instructions and allocations per committed step of the loop workload on the memory store (the event
# log on, no metrics), as figures a noisy machine does not move: callgrind and dhat counts of
# `graph-bench --workloads loop --quick` (runs of 1,000 steps) at `--repeat 1` and `--repeat 2` (4 and 7
# runs); the difference over the 3,000 extra steps is what a step costs, start-up left out. SHA-256
# (sha2's `compress256`) is reported apart: valgrind has no SHA-NI, so sha2 takes its software path
# there, while on a CPU with SHA extensions (this one, /proc/cpuinfo `sha_ni`) it takes its `x86`
# backend. Neither path branches inside a block, so each block runs its loop body once: the script
# counts both loop bodies in the binary's disassembly (objdump), divides the software instructions by
# the software body to get the blocks a step hashes, and prices those blocks at the SHA-NI body
# (`instructions_per_step_with_sha_extensions`; the few instructions around each call's loop are left
# out). Prints one JSON object.
#
#   bench/instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind > /dev/null || ! command -v objdump > /dev/null; then
    echo "installing valgrind and binutils (apt-get)..." >&2
    apt-get install -y -qq valgrind binutils > /dev/null
fi
# GRAPH_BENCH_BIN: a graph-bench already built in release (bench/compare.sh passes its own).
bin=${GRAPH_BENCH_BIN:-}
if [ -z "$bin" ]; then
    cargo build --release --quiet -p graph-bench
    bin=target/release/graph-bench
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in 1 2; do
    GRAPH_BENCH_MODE=memory valgrind --tool=callgrind --callgrind-out-file="$out/cg.$r" \
        "$bin" --workloads loop --quick --repeat "$r" > /dev/null 2>&1
    GRAPH_BENCH_MODE=memory valgrind --tool=dhat --dhat-out-file="$out/dhat.$r" \
        "$bin" --workloads loop --quick --repeat "$r" > /dev/null 2>&1
done
python3 - "$out" "$bin" <<'EOF'
import json, re, subprocess, sys

out, binary = sys.argv[1], sys.argv[2]
STEPS = 3 * 1000  # --repeat 2 runs three more loops of 1,000 steps than --repeat 1


def callgrind(r):
    text = subprocess.run(["callgrind_annotate", f"{out}/cg.{r}"], capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text).group(1).replace(",", ""))
    sha = re.search(r"([\d,]+) \(\s*[\d.]+%\)\s+\S*sha2::sha256::compress256", text)
    return total, int(sha.group(1).replace(",", "")) if sha else 0


def dhat(r):
    d = json.load(open(f"{out}/dhat.{r}"))
    return sum(p["tbk"] for p in d["pps"]), sum(p["tb"] for p in d["pps"])


def loop_body(symbol):
    """Instructions in the body of the outermost loop of `symbol` (demangled name, matched exactly)."""
    nm = subprocess.run(["nm", "-C", "-S", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    start, size = next((int(a, 16), int(n, 16)) for a, n, _, name in
                       (line.split(" ", 3) for line in nm.splitlines() if line.count(" ") >= 3) if name == symbol)
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={start}",
                          f"--stop-address={start + size}", binary], capture_output=True, text=True, check=True).stdout
    insns = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"^\s+([0-9a-f]+):\s+(.*)$", dis, re.M)]
    back = [(int(j.group(1), 16), addr) for addr, text in insns
            if (j := re.match(r"j\w+\s+([0-9a-f]+)\b", text)) and start <= int(j.group(1), 16) < addr]
    top, bottom = min(back, key=lambda b: b[0] - b[1])  # the longest backward jump: the block loop
    return sum(1 for addr, _ in insns if top <= addr <= bottom)


(t1, s1), (t2, s2) = callgrind(1), callgrind(2)
soft_block = loop_body("sha2::sha256::compress256")
shani_block = loop_body("sha2::sha256::x86::digest_blocks")
blocks = (s2 - s1) / STEPS / soft_block
(n1, b1), (n2, b2) = dhat(1), dhat(2)
print(json.dumps({
    "workload": "loop_instructions", "mode": "memory", "steps_measured": STEPS,
    "instructions_per_step": round((t2 - t1) / STEPS),
    "instructions_per_step_outside_sha256": round(((t2 - s2) - (t1 - s1)) / STEPS),
    "sha256_software_instructions_per_step": round((s2 - s1) / STEPS),
    "sha256_blocks_per_step": round(blocks, 2),
    "sha256_block_instructions": {"software": soft_block, "sha_ni": shani_block},
    "cpu_has_sha_ni": " sha_ni " in " " + open("/proc/cpuinfo").read().replace("\n", " ") + " ",
    "instructions_per_step_with_sha_extensions": round(((t2 - s2) - (t1 - s1)) / STEPS + blocks * shani_block),
    "allocations_per_step": round((n2 - n1) / STEPS, 1),
    "bytes_allocated_per_step": round((b2 - b1) / STEPS),
    "tool": "valgrind --tool=callgrind / --tool=dhat",
}))
EOF
