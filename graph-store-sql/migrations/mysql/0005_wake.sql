-- graph-runtime schema 5 (MySQL / MariaDB): when a parked run is due, for claims, the runs' mailboxes, and schedules.
-- A rerun after a crash part-way through is harmless (the runner takes "duplicate column" and "duplicate
-- key name" as applied).
--
-- A run that sleeps (`Ctx::sleep`) or asks with a deadline is parked (`waiting`, or `interrupted`) with
-- the time it is due, ms since the Unix epoch (`RunStatus::wake_at_ms`), written by every status change
-- (NULL when it waits for no time). Commits do not write it: a run that commits is `running` or
-- `completed`, and claims read it only beside a parked status. Workers claim due runs like runnable
-- ones, comparing it with the database's clock.
ALTER TABLE graph_runs ADD COLUMN wake_at_ms BIGINT NULL;
-- Claims: the parked runs due by now.
CREATE INDEX graph_runs_due ON graph_runs (status, wake_at_ms);

-- Each run's mailbox (the external events sent to it): `graph_store::mailbox::encode` bytes, read and
-- written back under the run row's lock (`Store::mailbox_op`).
CREATE TABLE IF NOT EXISTS graph_mailboxes (
    run_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    bytes  LONGBLOB NOT NULL
) ENGINE = InnoDB;

-- Schedules: `graph_store::schedule::encode` bytes by name, read and written back under the row's lock
-- (`Store::schedule_op`).
CREATE TABLE IF NOT EXISTS graph_schedules (
    name  VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    bytes LONGBLOB NOT NULL
) ENGINE = InnoDB;
