#!/usr/bin/env python3
"""LangGraph side of the engine-vs-LangGraph benchmark.

Runs four workloads (loop, fanout, durable, growth) whose definitions are
mirrored exactly by the Rust side, and prints one JSON object per
(workload, mode) to stdout as JSON Lines. Everything else (progress, timings
of each repetition) goes to stderr so stdout stays machine-readable.

Usage (after bench/langgraph/setup.sh):
    bench/.venv/bin/python bench/langgraph/bench.py [--repeat K]
        [--workloads loop,fanout,durable,growth] [--quick] [--tmp DIR]

Only `graph.invoke` is timed. Graph construction, compilation, opening the
SQLite file and creating its tables all happen before the clock starts, and
a warm-up invoke precedes every timed series so first-call costs (lazy
imports, schema inference caches) are not charged to the first repetition.
"""

from __future__ import annotations

import argparse
import gc
import json
import operator
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from importlib.metadata import version as pkg_version
from typing import Annotated, Any, Callable, Iterator, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

LG_VERSION = pkg_version("langgraph")
SAVER_VERSIONS = (
    f"langgraph-checkpoint {pkg_version('langgraph-checkpoint')}, "
    f"langgraph-checkpoint-sqlite {pkg_version('langgraph-checkpoint-sqlite')}, "
    f"CPython {platform.python_version()}"
)

# Full-size parameters; --quick divides the counts (not the byte sizes) by 10.
LOOP_N = 10_000
FANOUT_N = 1_000
DURABLE_N = 1_000
GROWTH_N = 1_000
# Byte sizes stay fixed under --quick so bytes_per_step stays comparable.
GROWTH_BASE_BYTES = 1 << 20  # 1 MiB initial chunk
GROWTH_DELTA_BYTES = 1024  # appended per step

ALL_WORKLOADS = ("loop", "fanout", "durable", "growth")

# sqlite3 reports PRAGMA synchronous as an integer.
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def emit(record: dict[str, Any]) -> None:
    # Flushed per record so a consumer reading the pipe sees results as soon
    # as each workload finishes, not only at exit.
    print(json.dumps(record), flush=True)


def timed_invoke(graph: Any, inp: Any, config: dict, **kwargs: Any) -> tuple[float, Any]:
    # Collect garbage left by the previous repetition so its cost is not
    # charged to this one; the collector stays enabled during the run since
    # that is part of what a LangGraph user pays.
    gc.collect()
    t0 = time.perf_counter()
    out = graph.invoke(inp, config, **kwargs)
    return time.perf_counter() - t0, out


def base_record(workload: str, mode: str, n: int, repeat: int, secs: list[float]) -> dict[str, Any]:
    return {
        "impl": "langgraph",
        "version": LG_VERSION,
        "workload": workload,
        "mode": mode,
        "n": n,
        "repeat": repeat,
        "seconds_median": statistics.median(secs),
        "seconds_all": secs,
    }


# --------------------------------------------------------------------------
# Graphs. Each builder returns an uncompiled StateGraph so callers can compile
# it with whichever checkpointer the mode needs.
# --------------------------------------------------------------------------


class LoopState(TypedDict):
    count: int


def build_loop(n: int) -> StateGraph:
    """`step` increments count and loops back to itself while count < n."""

    def step(state: LoopState) -> dict:
        return {"count": state["count"] + 1}

    def route(state: LoopState) -> str:
        return "step" if state["count"] < n else END

    builder = StateGraph(LoopState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", route, ["step", END])
    return builder


def loop_config(n: int, thread_id: str | None = None) -> dict:
    # Every step is one superstep, so the default limit (25) must be raised
    # above n; the margin is arbitrary.
    config: dict[str, Any] = {"recursion_limit": n + 100}
    if thread_id is not None:
        config["configurable"] = {"thread_id": thread_id}
    return config


class FanState(TypedDict):
    results: Annotated[list, operator.add]
    joined: int


class WorkInput(TypedDict):
    i: int


def build_fanout(n: int, join_calls: list[int]) -> StateGraph:
    """`fan` sends n `work` tasks; their results reduce into `join`.

    `join_calls` is appended to on every `join` run so the caller can check
    the barrier fired exactly once.
    """

    def fan(state: FanState) -> dict:
        return {}

    def route(state: FanState) -> list[Send]:
        return [Send("work", {"i": i}) for i in range(n)]

    def work(inp: WorkInput) -> dict:
        return {"results": [inp["i"]]}

    def join(state: FanState) -> dict:
        join_calls.append(1)
        return {"joined": len(state["results"])}

    builder = StateGraph(FanState)
    builder.add_node("fan", fan)
    builder.add_node("work", work)
    builder.add_node("join", join)
    builder.add_edge(START, "fan")
    builder.add_conditional_edges("fan", route, ["work"])
    builder.add_edge("work", "join")
    builder.add_edge("join", END)
    return builder


class GrowthState(TypedDict):
    chunks: Annotated[list, operator.add]


def build_growth(n: int, step_calls: list[int]) -> StateGraph:
    """`grow` appends a 1 KiB chunk and loops while len(chunks) <= n.

    Starting from one chunk, that is exactly n `grow` steps. The channel is a
    plain operator.add reducer (not the opt-in beta DeltaChannel), so every
    checkpoint carries the whole list: that is the cost being measured.
    """

    def grow(state: GrowthState) -> dict:
        step_calls.append(1)
        return {"chunks": ["y" * GROWTH_DELTA_BYTES]}

    def route(state: GrowthState) -> str:
        return "grow" if len(state["chunks"]) <= n else END

    builder = StateGraph(GrowthState)
    builder.add_node("grow", grow)
    builder.add_edge(START, "grow")
    builder.add_conditional_edges("grow", route, ["grow", END])
    return builder


# --------------------------------------------------------------------------
# SQLite helpers
# --------------------------------------------------------------------------


@contextmanager
def sqlite_saver(path: str) -> Iterator[SqliteSaver]:
    """A SqliteSaver on a file, with its tables already created.

    setup() is otherwise run lazily on the first write, which would put
    schema creation inside the timed invoke. from_conn_string closes the
    connection on exit, which also checkpoints and removes the -wal file.
    """
    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()
        yield saver


def sqlite_modes(saver: SqliteSaver) -> str:
    # Read from the saver's own connection: journal_mode is set to WAL by
    # setup(), synchronous is left at the connection default.
    journal = saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = saver.conn.execute("PRAGMA synchronous").fetchone()[0]
    return f"journal_mode={journal}, synchronous={SYNCHRONOUS_NAMES.get(sync, sync)}"


def sqlite_rows(saver: SqliteSaver) -> tuple[int, int]:
    checkpoints = saver.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    writes = saver.conn.execute("SELECT count(*) FROM writes").fetchone()[0]
    return checkpoints, writes


def sqlite_files(path: str) -> list[str]:
    return [p for p in (path, path + "-wal", path + "-shm") if os.path.exists(p)]


def remove_sqlite(path: str) -> None:
    for p in sqlite_files(path):
        os.remove(p)


# --------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------


def run_loop(n: int, repeat: int, modes: tuple[str, ...] = ("none", "memory")) -> None:
    builder = build_loop(n)
    for mode in modes:
        saver = InMemorySaver() if mode == "memory" else None
        graph = builder.compile(checkpointer=saver)

        def once(tag: str) -> float:
            thread = f"loop-{tag}" if saver else None
            secs, out = timed_invoke(graph, {"count": 0}, loop_config(n, thread))
            assert out["count"] == n, out
            if saver:
                # Keep the saver's footprint the same for every repetition.
                saver.delete_thread(thread)
            return secs

        # Warm up on the very graph that is timed; at full n since n is baked
        # into the routing closure.
        once("warmup")
        secs = []
        for r in range(repeat):
            secs.append(once(str(r)))
            log(f"[loop/{mode}] rep {r + 1}/{repeat}: {secs[-1]:.3f} s")

        rec = base_record("loop", mode, n, repeat, secs)
        rec["us_per_step"] = rec["seconds_median"] / n * 1e6
        note = SAVER_VERSIONS
        if mode == "memory":
            note += "; InMemorySaver, durability left at langgraph's default (async)"
        rec["note"] = note
        emit(rec)


def run_fanout(n: int, repeat: int) -> None:
    join_calls: list[int] = []
    builder = build_fanout(n, join_calls)
    for mode in ("none", "memory"):
        saver = InMemorySaver() if mode == "memory" else None
        graph = builder.compile(checkpointer=saver)

        def once(tag: str) -> float:
            join_calls.clear()
            config: dict[str, Any] = {}
            if saver:
                config["configurable"] = {"thread_id": f"fanout-{tag}"}
            secs, out = timed_invoke(graph, {"results": []}, config)
            assert out["joined"] == n, out["joined"]
            assert len(join_calls) == 1, f"join ran {len(join_calls)} times"
            if saver:
                saver.delete_thread(config["configurable"]["thread_id"])
            return secs

        once("warmup")
        secs = []
        for r in range(repeat):
            secs.append(once(str(r)))
            log(f"[fanout/{mode}] rep {r + 1}/{repeat}: {secs[-1]:.3f} s")

        rec = base_record("fanout", mode, n, repeat, secs)
        # n workers plus one activation each of fan and join.
        rec["us_per_activation"] = rec["seconds_median"] / (n + 2) * 1e6
        note = SAVER_VERSIONS + "; workers run in one superstep on langgraph's thread pool"
        if mode == "memory":
            note += "; InMemorySaver, durability left at langgraph's default (async)"
        rec["note"] = note
        emit(rec)


def run_durable(n: int, repeat: int, tmp: str) -> None:
    builder = build_loop(n)
    warm_builder = build_loop(max(10, n // 10))

    def once(b: StateGraph, steps: int, tag: str) -> tuple[float, str, tuple[int, int]]:
        # A fresh file per run; the saver is bound at compile time, so the
        # (cheap, untimed) compile is repeated per run rather than swapping
        # the checkpointer on a shared compiled graph.
        path = os.path.join(tmp, f"durable-{tag}.sqlite")
        remove_sqlite(path)
        with sqlite_saver(path) as saver:
            graph = b.compile(checkpointer=saver)
            modes = sqlite_modes(saver)
            secs, out = timed_invoke(
                graph, {"count": 0}, loop_config(steps, f"durable-{tag}"), durability="sync"
            )
            assert out["count"] == steps, out
            rows = sqlite_rows(saver)
        remove_sqlite(path)
        return secs, modes, rows

    once(warm_builder, max(10, n // 10), "warmup")
    secs = []
    for r in range(repeat):
        s, modes, rows = once(builder, n, str(r))
        secs.append(s)
        log(f"[durable/sqlite] rep {r + 1}/{repeat}: {s:.3f} s ({modes}; rows {rows})")

    rec = base_record("durable", "sqlite", n, repeat, secs)
    rec["steps_per_s"] = n / rec["seconds_median"]
    rec["note"] = (
        f"{SAVER_VERSIONS}; SqliteSaver on a file in {tmp}, invoke(durability=\"sync\"); "
        f"{modes}; after one run the db held {rows[0]} checkpoints and {rows[1]} writes"
    )
    emit(rec)


def run_growth(n: int, repeat: int, tmp: str) -> None:
    step_calls: list[int] = []
    builder = build_growth(n, step_calls)
    warm_n = max(10, n // 10)
    warm_builder = build_growth(warm_n, step_calls)

    def once(b: StateGraph, steps: int, tag: str) -> tuple[float, int, int, str, tuple[int, int]]:
        path = os.path.join(tmp, f"growth-{tag}.sqlite")
        remove_sqlite(path)
        step_calls.clear()
        # The initial 1 MiB string is built before the clock starts.
        inp = {"chunks": ["x" * GROWTH_BASE_BYTES]}
        with sqlite_saver(path) as saver:
            graph = b.compile(checkpointer=saver)
            modes = sqlite_modes(saver)
            secs, out = timed_invoke(
                graph, inp, loop_config(steps, f"growth-{tag}"), durability="sync"
            )
            assert len(out["chunks"]) == steps + 1, len(out["chunks"])
            rows = sqlite_rows(saver)
        # Measured after the connection is closed, as the brief requires;
        # sqlite normally folds the WAL back in and deletes it on close.
        db_bytes = sum(os.path.getsize(p) for p in sqlite_files(path))
        remove_sqlite(path)
        return secs, len(step_calls), db_bytes, modes, rows

    once(warm_builder, warm_n, "warmup")
    secs, db_sizes = [], []
    steps = 0
    for r in range(repeat):
        s, steps, db_bytes, modes, rows = once(builder, n, str(r))
        assert steps == n, steps
        secs.append(s)
        db_sizes.append(db_bytes)
        log(
            f"[growth/sqlite] rep {r + 1}/{repeat}: {s:.3f} s, {steps} steps, "
            f"{db_bytes / 2**20:.1f} MiB on disk"
        )

    rec = base_record("growth", "sqlite", n, repeat, secs)
    db_bytes = int(statistics.median(db_sizes))
    rec.update(
        steps=steps,
        db_bytes=db_bytes,
        bytes_per_step=db_bytes / steps,
        delta_bytes=GROWTH_DELTA_BYTES,
    )
    rec["note"] = (
        f"{SAVER_VERSIONS}; SqliteSaver on a file in {tmp}, invoke(durability=\"sync\"); "
        f"{modes}; operator.add list channel (full list in every checkpoint); "
        f"db_bytes = main file + -wal/-shm if left after close, median over runs "
        f"(all: {db_sizes}); {rows[0]} checkpoints and {rows[1]} writes in the db"
    )
    emit(rec)


# --------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5, help="timed runs per measurement (median reported)")
    p.add_argument(
        "--workloads",
        default=",".join(ALL_WORKLOADS),
        help=f"comma-separated subset of {','.join(ALL_WORKLOADS)}",
    )
    p.add_argument("--quick", action="store_true", help="divide step/task counts by 10 (smoke test)")
    p.add_argument("--tmp", help="directory for SQLite files (default: a fresh temp dir, removed at exit)")
    args = p.parse_args(argv)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(args.workloads) - set(ALL_WORKLOADS)
    if unknown:
        p.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scale = 10 if args.quick else 1

    own_tmp = args.tmp is None
    tmp = tempfile.mkdtemp(prefix="langgraph-bench-") if own_tmp else args.tmp
    os.makedirs(tmp, exist_ok=True)

    runners: dict[str, Callable[[], None]] = {
        "loop": lambda: run_loop(LOOP_N // scale, args.repeat),
        "fanout": lambda: run_fanout(FANOUT_N // scale, args.repeat),
        "durable": lambda: run_durable(DURABLE_N // scale, args.repeat, tmp),
        # Large on disk and slow, so it gets half the repetitions.
        "growth": lambda: run_growth(GROWTH_N // scale, max(1, args.repeat // 2), tmp),
    }
    log(f"langgraph {LG_VERSION}; {SAVER_VERSIONS}; sqlite files in {tmp}")
    try:
        for name in args.workloads:
            t0 = time.perf_counter()
            runners[name]()
            log(f"[{name}] workload wall time {time.perf_counter() - t0:.1f} s")
    finally:
        if own_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
