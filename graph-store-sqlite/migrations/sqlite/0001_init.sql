-- The SQLite store's schema, version 1. Applied by `SqliteStore::open` in one transaction, which then
-- records version 1 in `graph_schema_version`. Every value column holds the bytes of
-- `graph_runtime::store::record` (checkpoints, run rows), `journal` (effects, outbox rows) or `events`;
-- the other columns exist only to be queried by. Integers are the u64 of the API as SQLite's i64.

-- Run rows. `status` is the variant name (`running`, `completed`, ...), for `list_runs` by status.
CREATE TABLE runs (
    run_id      TEXT    NOT NULL PRIMARY KEY,
    status      TEXT    NOT NULL,
    latest_step INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    row         BLOB    NOT NULL
) WITHOUT ROWID;
-- list_runs(status = ...) in run-id order.
CREATE INDEX runs_by_status ON runs (status, run_id);

-- One checkpoint per (run, step): the primary key is the "step taken" check.
CREATE TABLE checkpoints (
    run_id          TEXT    NOT NULL,
    step            INTEGER NOT NULL,
    idempotency_key TEXT    NOT NULL,
    record          BLOB    NOT NULL,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

-- Idempotency keys, inserted first in a commit: the primary key is the "already committed" check. Kept
-- when a checkpoint is pruned.
CREATE TABLE idempotency_keys (
    key    TEXT    NOT NULL PRIMARY KEY,
    run_id TEXT    NOT NULL,
    step   INTEGER NOT NULL
) WITHOUT ROWID;

-- The event log of each run.
CREATE TABLE events (
    run_id TEXT    NOT NULL,
    seq    INTEGER NOT NULL,
    event  BLOB    NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- The pending step an interrupt left, until the run's next checkpoint.
CREATE TABLE pending (
    run_id TEXT NOT NULL PRIMARY KEY,
    step   BLOB NOT NULL
) WITHOUT ROWID;

-- The effect journal, by effect key.
CREATE TABLE effects (
    key        TEXT    NOT NULL PRIMARY KEY,
    run_id     TEXT    NOT NULL,
    step       INTEGER NOT NULL,
    path       TEXT    NOT NULL,
    call_index INTEGER NOT NULL,
    record     BLOB    NOT NULL
) WITHOUT ROWID;
-- effects(run) in (step, path, call index) order.
CREATE INDEX effects_by_run ON effects (run_id, step, path, call_index);

-- Outbox rows not yet acknowledged, drained in (run, step, emit order).
CREATE TABLE outbox (
    run_id TEXT    NOT NULL,
    step   INTEGER NOT NULL,
    idx    INTEGER NOT NULL,
    key    TEXT    NOT NULL,
    row    BLOB    NOT NULL,
    PRIMARY KEY (run_id, step, idx)
) WITHOUT ROWID;
-- ack_outbox(keys).
CREATE INDEX outbox_by_key ON outbox (key);
