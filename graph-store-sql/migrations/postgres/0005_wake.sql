-- graph-runtime schema 5 (PostgreSQL): when a parked run is due, for claims, the runs' mailboxes, and schedules. Each
-- statement is idempotent.
--
-- A run that sleeps (`Ctx::sleep`) or asks with a deadline is parked (`waiting`, or `interrupted`) with
-- the time it is due, ms since the Unix epoch (`RunStatus::wake_at_ms`), written by every status change
-- (NULL when it waits for no time). Commits do not write it: a run that commits is `running` or
-- `completed`, and claims read it only beside a parked status. Workers claim due runs like runnable
-- ones, comparing it with the database's clock.
ALTER TABLE graph_runs ADD COLUMN IF NOT EXISTS wake_at_ms BIGINT;
-- Claims: the parked runs due by now.
CREATE INDEX IF NOT EXISTS graph_runs_due ON graph_runs (status, wake_at_ms) WHERE wake_at_ms IS NOT NULL;

-- Each run's mailbox (the external events sent to it): `graph_store::mailbox::encode` bytes, read and
-- written back under the run row's lock (`Store::mailbox_op`).
CREATE TABLE IF NOT EXISTS graph_mailboxes (
    run_id TEXT COLLATE "C" PRIMARY KEY,
    bytes  BYTEA NOT NULL
);

-- Schedules: `graph_store::schedule::encode` bytes by name, read and written back under the row's lock
-- (`Store::schedule_op`).
CREATE TABLE IF NOT EXISTS graph_schedules (
    name  TEXT COLLATE "C" PRIMARY KEY,
    bytes BYTEA NOT NULL
);
