"""One line per graph-bench run for bench/ab.sh: the figure of each record of a JSON-lines file.

    python3 bench/ab_summary.py LABEL FILE
"""

import json
import sys


def figure(r):
    """A record's short name and its figure."""
    w, mode, n = r["workload"], r.get("mode", ""), r.get("n")
    if w == "fdatasync":
        ratio = f" ({r['ratio_to_fdatasync']:.2f}× probe)" if "ratio_to_fdatasync" in r else ""
        return f"probe[{mode}]", f"{r['ops_per_s_median']:,.0f}/s{ratio}"
    if "ratio_to_fdatasync" in r:
        rate = r.get("commits_per_s", r.get("commits_per_s_median", 0))
        return f"{w}[{mode}]", f"{rate:,.0f}/s ({r['ratio_to_fdatasync']:.2f}× probe)"
    if r.get("writer_cpu_us_per_commit") is not None:
        # The process's and the SQLite writer thread's CPU a commit (graph-bench's concurrent_sqlite).
        return f"{w}[{mode},{n}]", (
            f"{r['commits_per_s']:,.0f}/s (cpu {r['cpu_us_per_commit']:.1f} µs, "
            f"writer {r['writer_cpu_us_per_commit']:.1f} µs a commit)"
        )
    if "commits_per_s" in r:
        return f"{w}[{mode},{n}]", f"{r['commits_per_s']:,.0f}/s"
    for key in ("us_per_step", "us_per_activation", "commits_per_s_median", "ops_per_s_median", "ms_median", "seconds_median"):
        if key in r:
            return f"{w}[{mode},{n}]", f"{key} {r[key]:,.4g}"
    return f"{w}[{mode},{n}]", "?"


def main():
    label, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        records = [json.loads(line) for line in f if line.startswith("{")]
    print(label + ": " + "  ".join(f"{name} {value}" for name, value in map(figure, records)), flush=True)


if __name__ == "__main__":
    main()
