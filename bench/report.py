#!/usr/bin/env python3
"""Turns the JSON Lines of graph-bench and bench/langgraph/bench.py into docs/BENCHMARKS.md.

    python3 bench/report.py graph-runtime.jsonl langgraph.jsonl --command "REPEAT=5 bench/compare.sh"

The output is self-contained and short: one table per workload, the targets, and one paragraph per
workload on what bounds its figure. Every number in it comes from the two input files, or, for the
header, from the machine and the servers the report is generated on (`lscpu`, `rustc --version`,
Cargo.lock, the servers' own settings). The paragraphs are written here without numbers of their own:
what they quote is computed from the results. Measurements over time and experiments belong in
bench/analysis.md, not in the generated page.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
from urllib.parse import urlparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_URL = os.environ.get("GRAPH_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
MY_URL = os.environ.get("GRAPH_BENCH_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def sh(cmd, **kw):
    """A command's stdout, stripped; None when it fails (the report then says what it could not read)."""
    try:
        r = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, timeout=10,
                           cwd=ROOT, **kw)
        return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None
    except Exception:
        return None


def fmt(x, digits=1):
    if x is None:
        return "–"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def ratio(x, digits=1):
    return "–" if x is None else f"{fmt(x, digits)}×"


def div(a, b):
    return a / b if a is not None and b else None


def locked_version(crate):
    """The version of `crate` in the workspace's Cargo.lock."""
    try:
        with open(os.path.join(ROOT, "Cargo.lock")) as f:
            m = re.search(r'name = "' + re.escape(crate) + r'"\nversion = "([^"]+)"', f.read())
        return m.group(1) if m else None
    except OSError:
        return None


def postgres_settings():
    out = sh(["psql", PG_URL, "-tAc",
              "SELECT current_setting('server_version') || ', synchronous_commit = ' "
              "|| current_setting('synchronous_commit')"])
    return "PostgreSQL " + re.sub(r" \([^)]*\)", "", out) if out else None


def mysql_settings():
    u = urlparse(MY_URL.replace("mariadb://", "mysql://", 1))
    args = ["mysql", "-N", "-B", "-h", u.hostname or "127.0.0.1", "-P", str(u.port or 3306),
            "-u", u.username or "root", "-e",
            "SELECT CONCAT(VERSION(), ', innodb_flush_log_at_trx_commit = ', @@innodb_flush_log_at_trx_commit)"]
    env = dict(os.environ, MYSQL_PWD=u.password) if u.password else None
    out = sh(args, env=env)
    if not out:
        return None
    version, _, rest = out.partition(",")
    name = "MariaDB" if "mariadb" in version.lower() else "MySQL"
    return f"{name} {version.split('-')[0]},{rest}"


class Report:
    def __init__(self, ours, theirs):
        self.ours, self.theirs = ours, theirs
        self.out, self.targets = [], []

    def w(self, line=""):
        self.out.append(line)

    def pick(self, workload, mode=None, n=None, side=None):
        for r in (self.ours if side is None else side):
            if r["workload"] == workload and (mode is None or r.get("mode") == mode) and (n is None or r.get("n") == n):
                return r
        return None

    def lg(self, workload, mode=None):
        return self.pick(workload, mode, side=self.theirs)

    def target(self, what, value, met, digits=1):
        if value is not None:
            self.targets.append((what, ratio(value, digits), met(value)))

    def target_text(self, what, value, text, met):
        if value is not None:
            self.targets.append((what, text, met(value)))

    def table(self, header, align, rows):
        self.w("| " + " | ".join(header) + " |")
        self.w("|" + "|".join(align) + "|")
        for row in rows:
            self.w("| " + " | ".join(row) + " |")
        self.w()


def header(rep, command, paths):
    ours, theirs = rep.ours, rep.theirs
    lg = theirs[0] if theirs else {}
    lg_note = lg.get("note", "").split(";")[0]
    cpu = sh("lscpu | sed -n 's/^Model name: *//p'") or "CPU model not read"
    mem = sh("free -g | awk '/Mem:/{print $2}'")
    fs = sh("df -T \"${TMPDIR:-/tmp}\" | awk 'NR==2{print $2}'") or "?"
    repeats = sorted({r["repeat"] for r in ours + theirs if "repeat" in r})
    crates = ", ".join(f"{c} {v}" for c in ["sled", "rusqlite", "libsqlite3-sys", "sqlx"]
                       if (v := locked_version(c)))
    servers = "; ".join(s for s in [postgres_settings(), mysql_settings()] if s) or "not read"
    w = rep.w
    w("# Benchmarks")
    w()
    w("Generated by `bench/compare.sh` (through `bench/report.py`) from the raw results of one run; do not "
      "edit by hand. Measurements over time and the experiments behind the stores are in bench/analysis.md.")
    w()
    w(f"Command: `{command}`  ")
    w(f"Raw results: {', '.join(f'`{p}`' for p in paths)}  ")
    w(f"Machine: {sh('nproc') or '?'} cores, {cpu}, {mem or '?'} GiB RAM, Linux {platform.release()}, "
      f"file system of the stores: {fs}  ")
    w(f"Versions: graph-runtime {ours[0]['version'] if ours else '?'} ({sh('rustc --version') or 'rustc ?'}, "
      f"release build; {crates}), LangGraph {lg.get('version', '?')} ({lg_note or '?'}; pinned in "
      f"`bench/langgraph/requirements.txt`)  ")
    w(f"Database servers (on this machine, read when the report was made): {servers}  ")
    w(f"Each figure is the median of its workload's repetitions ({'–'.join(str(x) for x in (repeats[0], repeats[-1])) if repeats else '?'}"
      " in this run, as the raw results list). Both implementations ran in the same session on the same "
      "machine: compare ratios within this page, not with other machines.")
    w()


def loop_and_fanout(rep):
    for key, unit, title in [("loop", "us_per_step", "Loop: one node routing to itself {n:,} times (per-step overhead)"),
                             ("fanout", "us_per_activation", "Fan-out: {n:,} forked branches and one join (per-activation overhead)")]:
        num = "1" if key == "loop" else "2"
        base = rep.lg(key, "none")
        any_row = rep.pick(key) or base
        rep.w(f"## {num}. {title.format(n=any_row['n'] if any_row else 0)}")
        rep.w()
        durable = ("sled-async", "SledStore, `Durability::Async`") if key == "loop" else ("sled-sync", "SledStore, `Durability::Sync`")
        rows = []
        for name, store, r in [("graph-runtime", "MemoryStore (every step committed)", rep.pick(key, "memory")),
                               ("graph-runtime", "MemoryStore, metrics recorded (Prometheus recorder)", rep.pick(key, "memory+metrics")),
                               ("graph-runtime", durable[1], rep.pick(key, durable[0])),
                               ("LangGraph", "no checkpointer", base),
                               ("LangGraph", "InMemorySaver", rep.lg(key, "memory"))]:
            if r:
                rows.append([name, store, fmt(r[unit]), ratio(div(base and base[unit], r[unit]))])
        label = "µs per step" if key == "loop" else "µs per activation"
        rep.table(["implementation", "store", label, "LangGraph (no checkpointer) ÷ this"],
                  ["---", "---", "---:", "---:"], rows)
        mem = rep.pick(key, "memory")
        if mem:
            what = "Loop: µs per committed step (memory store, event log on, metrics off) ≤ 1.0" if key == "loop" \
                else "Fan-out: µs per activation (memory store) ≤ 1.0"
            rep.target_text(what, mem[unit], fmt(mem[unit]), lambda v: v <= 1.0)
        if mem and base:
            what = "Per-step overhead (loop)" if key == "loop" else "Per-activation overhead (fan-out)"
            rep.target(f"{what} ≥ 100× lower than LangGraph without checkpointer",
                       base[unit] / mem[unit], lambda v: v >= 100)
        if key == "loop":
            instructions(rep)


def instructions(rep):
    """The loop's instructions and allocations per step, from bench/instructions.sh (callgrind, dhat)."""
    r = rep.pick("loop_instructions")
    if not r:
        return
    rep.w(f"Instructions and allocations per committed step of the same loop on the memory store, counted by "
          f"valgrind over the {r['steps_measured']:,} steps one process runs more than another (start-up "
          f"excluded): `bench/instructions.sh`. Valgrind's CPU has no SHA extensions, so "
          f"SHA-256 runs sha2's software code there; its blocks are priced at sha2's SHA-NI loop "
          f"({r['sha256_block_instructions']['sha_ni']} instructions a block against {r['sha256_block_instructions']['software']:,}, "
          f"both counted in the binary's disassembly), the code this machine's CPU runs "
          f"({'it has' if r.get('cpu_has_sha_ni') else 'it does not have: sha2 falls back to software here'} SHA extensions).")
    rep.w()
    rep.table(["what", "per step"], ["---", "---:"], [
        ["instructions outside SHA-256 (callgrind)", fmt(r["instructions_per_step_outside_sha256"])],
        ["SHA-256 blocks hashed", fmt(r["sha256_blocks_per_step"], 2)],
        ["instructions, SHA-256 on the CPU's SHA extensions", fmt(r["instructions_per_step_with_sha_extensions"])],
        ["instructions, SHA-256 in software (as valgrind runs it)", fmt(r["instructions_per_step"])],
        ["allocations (dhat)", fmt(r["allocations_per_step"])],
        ["bytes allocated (dhat)", fmt(r["bytes_allocated_per_step"])],
    ])
    rep.target_text("Loop: instructions per step, SHA-256 on the CPU's SHA extensions, ≤ 15,000",
                    r["instructions_per_step_with_sha_extensions"], fmt(r["instructions_per_step_with_sha_extensions"]),
                    lambda v: v <= 15000)
    rep.target_text("Loop: allocations per step ≤ 20", r["allocations_per_step"], fmt(r["allocations_per_step"]),
                    lambda v: v <= 20)


def durable(rep):
    probe = rep.pick("fdatasync", "disk")
    o, lgd = rep.pick("durable", "sled-sync"), rep.lg("durable")
    rep.w(f"## 3. Durable sequential: one run, {o['n'] if o else 0:,} steps, every commit durable (`Async` rows excepted)")
    rep.w()
    rows = []
    p = probe["ops_per_s_median"] if probe else None

    def row(what, steps, commits, against=p, digits=2):
        rows.append([what, fmt(steps), fmt(commits), fmt(div(commits if commits is not None else steps, against), digits)])

    if probe:
        rows.append([f"the probe: {probe['note']}", "–", fmt(p), "1.00"])
    if o:
        row("graph-runtime, SledStore, `Durability::Sync`", o["steps_per_s"], o["commits_per_s"])
    sled = locked_version("sled") or ""
    for mode, what in [("flush+fdatasync", f"sled {sled} alone, one thread: transaction over three trees, `flush`, `fdatasync` of its log"),
                       ("flush", f"sled {sled} alone, `flush` only (`sync_file_range`: survives a killed process, not a power loss)")]:
        f = rep.pick("sled-floor", mode)
        if f:
            row(what, None, f["commits_per_s_median"])
    # A journal write is a durable commit of its own: an idempotent effect adds one to its step's
    # commit, a non-idempotent one two (Started, then the response).
    for mode, writes, what in [("idempotent", 2, "SledStore, `Sync`, one idempotent effect a step (its journal write + the step's commit)"),
                               ("non_idempotent", 3, "SledStore, `Sync`, one non-idempotent effect a step (`Started`, the response, the step's commit)")]:
        e = rep.pick("effects", mode)
        if e:
            row("graph-runtime, " + what, e["steps_per_s"], e["steps_per_s"] * writes)
    q_probe = rep.pick("fdatasync", "disk-sqlite-run")
    qp = q_probe["ops_per_s_median"] if q_probe else None
    if q_probe:
        rows.append([f"the probe again: {q_probe['note']} (the SQLite rows' reference)", "–", fmt(qp), "1.00"])
    fb = rep.pick("fdatasync", "disk-sqlite-commit-bytes")
    if fb:
        rows.append([f"the device alone for a `Sync` commit's log bytes ({fb['bytes']:,} bytes overwritten + `fdatasync`)",
                     "–", fmt(fb["ops_per_s_median"]), fmt(fb["ratio_to_fdatasync"], 2)])
    for mode, what in [("sqlite-sync", "graph-runtime, SqliteStore, `Durability::Sync`"),
                       ("sqlite-async", "graph-runtime, SqliteStore, `Durability::Async` (not power-loss safe)")]:
        q = rep.pick("durable", mode)
        if q:
            rows.append([what, fmt(q["steps_per_s"]), fmt(q["commits_per_s"]), fmt(q["ratio_to_fdatasync"], 2)])
    for mode, store in [("postgres", "PostgresStore"), ("mysql", "MySqlStore")]:
        fl, q = rep.pick("floor", mode), rep.pick("durable", mode)
        if fl:
            row(f"{mode} floor: {'; '.join(fl['note'].split('; ')[:2])}", None, fl["commits_per_s_median"])
        if q:
            row(f"graph-runtime, {store}", None, q["commits_per_s"])
    if lgd:
        row(f"LangGraph {lgd['version']}, SqliteSaver, `durability=\"sync\"`", lgd["steps_per_s"], None)
    rep.table(["what", "steps/s", "commits/s", "÷ its probe"], ["---", "---:", "---:", "---:"], rows)

    if o and probe:
        rep.target("SledStore: durable sequential ≥ 0.9× the `fdatasync` rate", o["ratio_to_fdatasync"], lambda v: v >= 0.9, 2)
    if o and lgd:
        rep.target("SledStore: durable sequential ≥ 5× LangGraph's SQLite saver (sync)", o["steps_per_s"] / lgd["steps_per_s"], lambda v: v >= 5)
    q = rep.pick("durable", "sqlite-sync")
    if q:
        rep.target("SqliteStore `Sync`: durable sequential ≥ 0.7× the `fdatasync` rate probed in its run",
                   q["ratio_to_fdatasync"], lambda v: v >= 0.7, 2)
        if lgd:
            rep.target("SqliteStore `Sync`: durable sequential ≥ 5× LangGraph's SQLite saver (sync)",
                       q["steps_per_s"] / lgd["steps_per_s"], lambda v: v >= 5)
    for mode, name in [("postgres", "PostgresStore"), ("mysql", "MySqlStore")]:
        fl, q = rep.pick("floor", mode), rep.pick("durable", mode)
        if fl and q:
            # The median of the pairs' ratios (each floor repetition right after an engine run).
            value = fl.get("floor_over_durable", fl["commits_per_s_median"] / q["commits_per_s"])
            rep.target(f"{name}: durable sequential within 1.5× of the bare transaction (floor ÷ store, median of pairs)",
                       value, lambda v: v <= 1.5, 2)


STORES = [("sled-sync", "SledStore"), ("sqlite-sync", "SqliteStore"), ("postgres", "PostgresStore"), ("mysql", "MySqlStore")]


def concurrent(rep):
    rep.w("## 4. Durable concurrent: many runs at once (group commit)")
    rep.w()
    by_store = {mode: {r["n"]: r for r in rep.ours if r["workload"] == "concurrent" and r["mode"] == mode} for mode, _ in STORES}
    stores = [(mode, name) for mode, name in STORES if by_store[mode]]
    counts = sorted({n for rows in by_store.values() for n in rows})
    steps = ", ".join(f"{name} {next(iter(by_store[mode].values()))['steps_per_run']}" for mode, name in stores)
    rep.w(f"Aggregate durable commits per second of all runs, and ÷ one run (steps per run: {steps}; "
          "`Durability::Sync`; the server stores with the pool `connect` makes).")
    rep.w()
    rows = []
    for n in counts:
        cells = [f"{n:,}"]
        for mode, _ in stores:
            r, one = by_store[mode].get(n), by_store[mode].get(1)
            cells.append(f"{fmt(r['commits_per_s'])} ({ratio(div(r['commits_per_s'], one and one['commits_per_s']))})" if r else "–")
        rows.append(cells)
    rep.table(["runs at once"] + [name for _, name in stores], ["---:"] * (len(stores) + 1), rows)
    for mode, name in STORES:
        if mode in ("mysql", "sqlite-sync"):
            continue  # no 10× target: MySQL's commits are not grouped by the store; SQLite's below
        r64, one = by_store[mode].get(64), by_store[mode].get(1)
        if r64 and one:
            rep.target(f"{name}: durable concurrent at 64 runs ≥ 10× one run", r64["commits_per_s"] / one["commits_per_s"], lambda v: v >= 10)
    # One SQLite run commits near the device's sync rate, so 64 ÷ 1 measures the disk; instead, group
    # commit has to hide the sync: 64 runs in `Sync` at least as fast in aggregate as one run in `Async`.
    s64, a1 = by_store["sqlite-sync"].get(64), rep.pick("durable", "sqlite-async")
    if s64 and a1:
        rep.target("SqliteStore: 64 runs in `Sync`, aggregate commits/s ≥ one run in `Async`",
                   s64["commits_per_s"] / a1["commits_per_s"], lambda v: v >= 1.0, 2)

    workers = [r for r in rep.ours if r["workload"] == "workers"]
    if workers:
        rep.w(f"Workers sharing one database (workloads `workers_postgres`, `workers_mysql`): {workers[0]['runs']:,} "
              f"submitted runs of {workers[0]['steps_per_run']} steps drained by each number of workers "
              f"({workers[0]['note']}); the floor is the bare transaction of table 3:")
        rep.w()
        rows = []
        for r in workers:
            fl = rep.pick("floor", r["mode"])
            rows.append([r["mode"], str(r["n"]), fmt(r["runs_per_s"]), fmt(r["steps_per_s"]),
                         fmt(fl["commits_per_s_median"]) if fl else "–"])
        rep.table(["database", "workers", "runs/s", "steps/s", "floor commits/s"], ["---", "---:", "---:", "---:", "---:"], rows)
        stats = [r for r in rep.ours if r["workload"] == "workers_stats"]
        if stats:
            rep.w("The servers' own statistics over the same batches (`workers_stats` rows): counters per "
                  "committed step, and the mean number of the database's sessions in each state, sampled every "
                  "5 ms while the workers ran (sessions idle in their pools left out):")
            rep.w()
            # (database, counter per step or session state, what it is)
            what = [("postgres", "per_step", "tup_returned", "rows read by scans (`pg_stat_database.tup_returned`)"),
                    ("postgres", "per_step", "xact_commit", "transactions committed"),
                    ("postgres", "per_step", "wal_sync", "WAL syncs"),
                    ("postgres", "sessions", "active: on CPU", "running a statement, on CPU"),
                    ("postgres", "sessions", "active: LWLock WALWrite", "waiting for another session's WAL flush"),
                    ("postgres", "sessions", "active: IO WALSync", "in a WAL sync"),
                    ("postgres", "sessions", "idle in transaction", "in a transaction, waiting on the worker"),
                    ("mysql", "per_step", "Handler_read_next", "index rows read in order (`Handler_read_next`)"),
                    ("mysql", "per_step", "Com_commit", "transactions committed"),
                    ("mysql", "per_step", "Innodb_log_writes", "redo log writes"),
                    ("mysql", "per_step", "Innodb_row_lock_waits", "row lock waits"),
                    ("mysql", "sessions", "Updating status", "in state `Updating status`"),
                    ("mysql", "sessions", "Opening tables", "in state `Opening tables`"),
                    ("mysql", "sessions", "Commit", "in state `Commit`")]
            by = {(r["mode"], r["n"]): r for r in stats}
            counts = sorted({r["n"] for r in stats})
            rows = []
            for mode, kind, key, label in what:
                found = [by.get((mode, n)) for n in counts]
                if any(found):
                    # A state no sample saw had no session in it.
                    cells = ["–" if r is None else f"{r[kind].get(key, 0.0):.3g}" for r in found]
                    unit = "per step" if kind == "per_step" else "mean sessions"
                    rows.append([{"postgres": "PostgreSQL", "mysql": "MariaDB"}[mode], f"{label} ({unit})"] + cells)
            rep.table(["database", "what"] + [f"{n} worker{'s' if n > 1 else ''}" for n in counts],
                      ["---", "---"] + ["---:"] * len(counts), rows)
        for mode, name in [("postgres", "PostgreSQL"), ("mysql", "MariaDB/MySQL")]:
            by_n = {r["n"]: r for r in workers if r["mode"] == mode}
            if 1 in by_n and len(by_n) > 1:
                worst = min((r["runs_per_s"] / by_n[1]["runs_per_s"], n) for n, r in by_n.items() if n > 1)
                rep.target_text(f"Workers on {name}: every added worker ≥ 1.0× one worker's runs/s (worst count)",
                                worst[0], f"{ratio(worst[0], 2)} ({worst[1]} workers)", lambda v: v >= 1.0)


def growth(rep):
    mem, sled, t = rep.pick("growth", "memory"), rep.pick("growth", "sled-sync"), rep.lg("growth")
    any_row = sled or mem
    delta = any_row["delta_bytes"] if any_row else 0
    rep.w(f"## 5. Growth: a large state growing {delta:,} bytes a step for {any_row['n'] if any_row else 0:,} steps")
    rep.w()
    rows = []
    for name, r in [("graph-runtime, MemoryStore", mem), ("graph-runtime, SledStore `Sync`", sled)]:
        if r:
            rec = r.get("record_bytes_per_step")
            rows.append([name, fmt(r["state_bytes_per_step"]), fmt(rec), str(r.get("snapshots", "–")),
                         ratio(div(rec or r["state_bytes_per_step"], r["delta_bytes"]), 2), fmt(r.get("store_bytes_on_disk"))])
    if t:
        rows.append([f"LangGraph {t['version']}, SqliteSaver (sync)", "–", fmt(t["bytes_per_step"]), "–",
                     ratio(div(t["bytes_per_step"], t["delta_bytes"])), fmt(t["db_bytes"])])
    rep.table(["implementation", "state bytes written a step", "whole records a step", "snapshots", "÷ the delta", "store bytes after"],
              ["---", "---:", "---:", "---:", "---:", "---:"], rows)
    if sled:
        per = sled.get("record_bytes_per_step") or sled["state_bytes_per_step"]
        rep.target("Growth: bytes written a step ≤ 4× the delta", per / sled["delta_bytes"], lambda v: v <= 4, 2)


def resume(rep):
    rows = sorted([r for r in rep.ours if r["workload"] == "resume"], key=lambda r: r["n"])
    rep.w("## 6. Resume latency after a long history (SledStore `Sync`)")
    rep.w()
    cells = []
    for r in rows:
        size = r.get("store_bytes_on_disk")
        cells.append([f"{r['n']:,}", f"{size / 2**20:.1f} MiB" if size else "–", fmt(r["ms_median"], 2),
                      fmt(r.get("open_ms_median"), 2)])
    rep.table(["committed steps before", "store on disk", "resume: load, verify the log's tail, run and commit one step (ms)",
               "opening the store beforehand (ms)"], ["---:"] * 4, cells)
    if len(rows) >= 2:
        rep.target(f"Resume after {rows[-1]['n']:,} steps within 2× of after {rows[0]['n']:,}",
                   rows[-1]["ms_median"] / rows[0]["ms_median"], lambda v: v <= 2, 2)


def memory(rep):
    r = rep.pick("memory")
    rep.w("## 7. Memory: runs in flight")
    rep.w()
    if r:
        rep.table(["runs in flight", "RSS before", "RSS with all parked in a node", "per run"], ["---:"] * 4,
                  [[f"{r['n']:,}", f"{r['rss_before'] / 2**20:.1f} MiB", f"{r['rss_in_flight'] / 2**20:.1f} MiB",
                    f"{fmt(r['bytes_per_run'] / 1024)} KiB"]])
        rep.target_text("Memory per run parked in a node ≤ 4 KiB", r["bytes_per_run"],
                        f"{fmt(r['bytes_per_run'] / 1024)} KiB", lambda v: v <= 4096)


def waiting(rep):
    rep.w("## 8. Runs that wait: sleeping runs, wake-up lateness, event delivery")
    rep.w()
    rows = [r for r in rep.ours if r["workload"] == "sleepers"]
    if rows:
        rep.table(["sleeping runs", "sled page cache", "RSS before", "RSS with all asleep", "per run", "per run, second half"],
                  ["---:"] * 6,
                  [[f"{r['n']:,}", f"{r['sled_cache_bytes'] / 2**20:.0f} MiB", f"{r['rss_before'] / 2**20:.1f} MiB",
                    f"{r['rss_after'] / 2**20:.1f} MiB", f"{fmt(r['bytes_per_sleeping_run'], 0)} B",
                    f"{fmt(r['bytes_per_sleeping_run_marginal'], 0)} B"] for r in rows])
        bounded = min(rows, key=lambda r: r["sled_cache_bytes"])
        rep.target_text(f"{bounded['n']:,} sleeping runs: memory per sleeping run ≤ 1 KiB (second half, "
                        f"{bounded['sled_cache_bytes'] / 2**20:.0f} MiB sled cache)",
                        bounded["bytes_per_sleeping_run_marginal"],
                        f"{fmt(bounded['bytes_per_sleeping_run_marginal'], 0)} B",
                        lambda v: v <= 1024)
    r = rep.pick("wake_lateness")
    if r:
        rep.table(["timers", "due a second", "lateness p50", "p99", "max"], ["---:"] * 5,
                  [[f"{r['n']:,}", f"{r['due_per_s']:,}", f"{fmt(r['lateness_ms_p50'])} ms",
                    f"{fmt(r['lateness_ms_p99'])} ms", f"{fmt(r['lateness_ms_max'])} ms"]])
        rep.target_text("Wake-up lateness p99 ≤ 50 ms at 1,000 timers due a second (sled)", r["lateness_ms_p99"],
                        f"{fmt(r['lateness_ms_p99'])} ms", lambda v: v <= 50)
    rows = [r for r in rep.ours if r["workload"] == "event_latency"]
    if rows:
        rep.table(["store", "events", "send → node resumes p50", "p99", "who delivers"], ["---", "---:", "---:", "---:", "---"],
                  [[r["mode"], f"{r['n']:,}", f"{fmt(r['latency_ms_p50'], 2)} ms", f"{fmt(r['latency_ms_p99'], 2)} ms",
                    "the engine's timer service" if r["mode"] == "sled" else "one worker, polling every 20 ms"]
                   for r in rows])


def composition(rep):
    rows = {r["mode"]: r for r in rep.ours if r["workload"] == "subgraph"}
    if not rows:
        return
    rep.w("## 9. Composition: steps inside a subgraph")
    rep.w()
    inline, nested = rows.get("inline"), rows.get("nested")
    table = []
    for r, what in [(inline, "inline: one loop of {n:,} steps"), (nested, "nested: {calls:,} subgraph runs of {inner:,} steps")]:
        if r:
            table.append([what.format(**r), f"{fmt(r['us_per_step'], 2)} µs",
                          ratio(r["us_per_step"] / inline["us_per_step"], 2) if inline else "—"])
    rep.table(["memory store", "per step", "vs inline"], ["---", "---:", "---:"], table)
    rep.w("A subgraph run's own start and end are commits of their own, and the parent commits a step per "
          "call: the difference per step is that cost spread over the subgraph's steps.")
    rep.w()


def replay_check(rep):
    r = next((r for r in rep.ours if r["workload"] == "replay_check"), None)
    if not r:
        return
    rep.w("## 10. Versioning: the replay check before a deploy")
    rep.w()
    rep.table(["sled store", "runs", "steps each", "whole check", "per run", "per step"],
              ["---", "---:", "---:", "---:", "---:", "---:"],
              [["`Engine::check_replays` (strict)", f"{r['runs']:,}", f"{r['steps']:,}", f"{fmt(r['seconds'], 2)} s",
                f"{fmt(r['ms_per_run'], 3)} ms", f"{fmt(r['us_per_step'], 2)} µs"]])
    rep.w("Each run is re-executed from its first checkpoint into a scratch store, every checkpoint compared "
          "byte for byte with the stored one; `graphctl replay --all` does the same run by run.")
    rep.w()


def inspector(rep):
    rows = [r for r in rep.ours if r["workload"] == "inspector"]
    if not rows:
        return
    runs = rows[0]["runs"]
    rep.w(f"## 11. Inspector: `graphctl serve` over {runs:,} stored runs")
    rep.w()
    rep.table(["request (sled store)", "runs in the answer", "p50", "p99", "max"],
              ["---", "---:", "---:", "---:", "---:"],
              [[r["mode"], f"{r['rows']:,}", f"{fmt(r['ms_p50'], 2)} ms", f"{fmt(r['ms_p99'], 2)} ms",
                f"{fmt(r['ms_max'], 2)} ms"] for r in rows])
    rep.w(f"{rows[0]['requests']:,} requests of each kind, one at a time, each on a connection of its own to the "
          "router `graphctl serve` runs, on 127.0.0.1; a request's time runs from writing it to reading the "
          "response whole. The store holds runs of two steps, every tenth left running. Workload `inspector` of "
          "`graph-bench` (`bench/compare.sh` runs it; alone: `cargo build --release -p graph-bench && "
          "target/release/graph-bench --workloads inspector`).")
    rep.w()
    pages = [r for r in rows if r["mode"] != "a run's page (show)"]
    worst = max(r["ms_p99"] for r in pages)
    rep.target_text(f"Inspector: a page of the runs list at {runs:,} runs, p99 ≤ 200 ms (worst kind)", worst,
                    f"{fmt(worst, 2)} ms", lambda v: v <= 200)


def targets(rep):
    rep.w("## Targets")
    rep.w()
    rep.table(["target", "measured", "met"], ["---", "---:", ":---:"],
              [[what, value, "yes" if ok else "**no**"] for what, value, ok in rep.targets])


def limits(rep):
    """One paragraph per workload: what bounds its figure. Numbers only as computed from the results."""
    w, pick = rep.w, rep.pick
    w("## What limits each figure")
    w()
    w("**Loop.** A step whose node does nothing still builds its `Ctx`, runs the node, merges its delta, "
      "hashes the order keys and the idempotency key (SHA-256), appends `STEP_COMMITTED` to the run's "
      "hash-chained event log, and encodes and commits the checkpoint: the figure is CPU and allocator "
      "work, not I/O. Recording metrics adds a lookup per value recorded; the sled row adds encoding the "
      "record and the store's write" + _delta(pick("loop", "memory"), pick("loop", "sled-async"), "us_per_step",
                                              " ({:.1f} µs a step more than the memory store here)") +
      ". LangGraph's figure is its own per-step overhead in Python, measured in the same session.")
    w()
    w("**Fan-out.** Every branch is an item of its own: a task spawned, a `Ctx`, an order key and a path "
      "identity hashed, a delta merged at the barrier in order-key order, then one join. The figure is "
      "the runtime's task spawning and the allocator's, and is the most sensitive to the heap's state "
      "left by earlier workloads; the sled row adds one durable commit shared by the whole step.")
    w()
    o, p = pick("durable", "sled-sync"), pick("fdatasync", "disk")
    per = (f" (here {1e6 / o['commits_per_s']:.0f} µs a commit against the probe's "
           f"{1e6 / p['ops_per_s_median']:.0f} µs)" if o and p else "")
    w("**Durable sequential.** A commit is acknowledged only once it is on the device, so one run pays one "
      "device round trip a step: the bound is the device's sync rate, and the last column is each store's "
      "rate against the probe taken beside it. SledStore: one `fdatasync` of its commit log per commit "
      "group, plus checking the group against sled, on the committing run's own thread when no other "
      "commit is queued" + per + "; the apply to sled runs behind the answer, on the store's applier "
      "thread. Its ratio is the median over the runs of each run's rate against the mean of the probes taken "
      "just before and just after it (the disk's rate drifts from one second to the next); the bare-sled rows are the "
      "reference its log replaced (sled's `flush` alone is not power-loss safe). Each effect's journal write "
      "is a durable commit of its own. SqliteStore: one WAL sync per `COMMIT`, of whole-page frames "
      "(`Async`: syncs only at WAL checkpoints). The server stores add the server's commit flush and their "
      "round trips to the engine's step; the floor sends the same statements bare.")
    w()
    sq64 = pick("concurrent", "sqlite-sync", 64)
    cpu = ""
    if sq64 and sq64.get("cpu_us_per_commit") and sq64.get("cpu_ceiling_commits_per_s"):
        writer = sq64.get("writer_cpu_us_per_commit")
        cpu = (f" At 64 runs the SQLite run used {sq64['cpu_us_per_commit']:.0f} µs of CPU a commit"
               + (f" ({writer:.0f} µs of it on the writer thread)" if writer else "")
               + f": the machine's {sq64.get('cores', '?')} cores could carry {fmt(sq64['cpu_ceiling_commits_per_s'])} "
               f"commits/s, and the runs reached {fmt(sq64['commits_per_s'])}"
               + (", so its one writer, not the machine, is the bound."
                  if sq64["commits_per_s"] < 0.8 * sq64["cpu_ceiling_commits_per_s"]
                  else ", close to what the cores allow."))
    pg64 = pick("concurrent", "postgres", 64)
    grp = ""
    if pg64 and pg64.get("groups") and pg64["groups"].get("group_transactions"):
        g = pg64["groups"]
        grp = (f" PostgreSQL's 64 runs committed {g['grouped_commits']:,} of their commits in "
               f"{g['group_transactions']:,} groups ({g['grouped_commits'] / g['group_transactions']:.1f} a group).")
    w("**Durable concurrent.** Commits that arrive while a group is being written form the next group: one "
      "log write and one sync for all of them (PostgreSQL: one transaction; MySQL/MariaDB commits each step "
      "alone and shares only the server's own log flush). One run is bound by the device's round trip, "
      "many runs by CPU: sled's commit thread, SQLite's single writer thread, the server's processes, all on "
      "the cores the engine uses too. The ratio to one run is the quotient of those two bounds, so a faster "
      "disk, or a faster single commit, lowers it." + cpu + grp +
      " Workers share the database: its commit rate is the ceiling on their steps, whatever their number;"
      " on a machine of few cores they also share the cores with the database server (bench/analysis.md §7).")
    w()
    g = pick("growth", "sled-sync")
    snaps = f" ({g['snapshots']} in this run)" if g and "snapshots" in g else ""
    w("**Growth.** A step writes its merged delta, not the state; the whole record adds the envelope (magic, "
      "version, SHA-256) and the metadata (frontier, idempotency key, fingerprint, times, event head). A full "
      f"snapshot is written only when the deltas since the last one outweigh the state{snaps}, and a delta "
      "chain's length is bounded, so loading stays bounded too. LangGraph's SQLite saver writes the whole "
      "changed channel every step.")
    w()
    rows = sorted([r for r in rep.ours if r["workload"] == "resume"], key=lambda r: r["n"])
    grow = (f" (the store grew from {rows[0]['store_bytes_on_disk'] / 2**20:.1f} to "
            f"{rows[-1]['store_bytes_on_disk'] / 2**20:.1f} MiB between the two rows)"
            if len(rows) >= 2 and rows[0].get("store_bytes_on_disk") and rows[-1].get("store_bytes_on_disk") else "")
    w("**Resume.** Resuming reads the run row, the latest checkpoint, the snapshot it refers to and the "
      "deltas since, verifies the event log from the head the checkpoint recorded, runs one step and "
      "commits it: nothing reads the history. What still grows with the store is sled's tree depth and a "
      f"cold page cache{grow}. Opening is timed apart: sled rebuilds its page table from its own log, the "
      "store replays its commit log's tail since the last checkpoint (about two checkpoint intervals at "
      "most) and waits for those writes to be durable.")
    w()
    w("**Runs that wait.** A sleeping run is its rows in the store and one entry of the engine's timer index "
      "(its due time and run id); it holds no task. What grows with the number of sleeping runs is sled's: "
      "its page cache, filled with what was written up to its bound, and its table of every page. With the "
      "cache bounded, the second half's growth is the marginal cost of a sleeping run. Lateness is the "
      "timer service's: it sleeps until the earliest due time and wakes each due run on a task of its own, "
      "which reads the run and resumes the node before anything is written. Its tail is set by the store's "
      "checkpoints: the woken runs commit their steps, and each time the sled store's log reaches "
      "`checkpoint_bytes` the store flushes sled, and the wakes due meanwhile wait behind the flush, for a "
      "time that grows with the interval (bench/analysis.md §8b: the reason its default is 2 MiB). "
      "An event on sled reaches its node through the "
      "same service, told at once by the send; on PostgreSQL a worker finds the run made due at its next "
      "poll, so the poll interval bounds the latency.")
    w()
    w("**Memory.** Each parked run holds its driver task and its item's task (their futures), its state, "
      "and its checkpoints and events in the `MemoryStore`. The workload runs in a process of its own "
      "(`graph-bench` re-executes itself), so no other workload's freed heap is reused.")


def _delta(base, other, key, text):
    return text.format(other[key] - base[key]) if base and other else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("theirs")
    ap.add_argument("--command", default="bench/compare.sh")
    a = ap.parse_args()
    rep = Report(load(a.ours), load(a.theirs))
    header(rep, a.command, [os.path.relpath(p, ROOT) if os.path.abspath(p).startswith(ROOT) else p
                            for p in (a.ours, a.theirs)])
    loop_and_fanout(rep)
    durable(rep)
    concurrent(rep)
    growth(rep)
    resume(rep)
    memory(rep)
    waiting(rep)
    composition(rep)
    replay_check(rep)
    inspector(rep)
    targets(rep)
    limits(rep)
    print("\n".join(rep.out).rstrip() + "\n", end="")


if __name__ == "__main__":
    sys.exit(main())
