-- The SQLite store's schema, version 2: the append-only tables `checkpoints` and `events` become rowid
-- tables, each with a unique index on its former primary key.
--
-- Why: a commit appends one checkpoint row and its events. In a `WITHOUT ROWID` table (an index
-- b-tree) an append that overflows the last leaf goes through SQLite's `balance_nonroot`, which
-- redistributes the cells of up to three sibling leaves and rewrites them and their parent: several
-- WAL frames every few commits (in the bench's loop a checkpoint row fills a fifth of a leaf). In a
-- rowid table a new rowid is the largest yet, and an overflowing append at the right edge takes
-- `balance_quick`: one new leaf and the parent, the full leaf left as it is. The rows of a group of
-- concurrent commits also land on the same few last leaves instead of one leaf per run. The unique
-- indexes hold small entries (run id, step or seq) and split rarely.
--
-- Applied in place to a version-1 database, in the same transaction as the version row: the rows are
-- copied in key order (so rowids follow (run_id, step) and (run_id, seq)), the old tables dropped and
-- the new ones renamed.

CREATE TABLE checkpoints_v2 (
    run_id          TEXT    NOT NULL,
    step            INTEGER NOT NULL,
    idempotency_key TEXT    NOT NULL,
    record          BLOB    NOT NULL
);
INSERT INTO checkpoints_v2 (run_id, step, idempotency_key, record)
    SELECT run_id, step, idempotency_key, record FROM checkpoints ORDER BY run_id, step;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_v2 RENAME TO checkpoints;
-- One checkpoint per (run, step): the unique index is the "step taken" check, and serves every read
-- by run and step.
CREATE UNIQUE INDEX checkpoints_by_step ON checkpoints (run_id, step);

CREATE TABLE events_v2 (
    run_id TEXT    NOT NULL,
    seq    INTEGER NOT NULL,
    event  BLOB    NOT NULL
);
INSERT INTO events_v2 (run_id, seq, event) SELECT run_id, seq, event FROM events ORDER BY run_id, seq;
DROP TABLE events;
ALTER TABLE events_v2 RENAME TO events;
-- The event log of each run, in seq order.
CREATE UNIQUE INDEX events_by_seq ON events (run_id, seq);
