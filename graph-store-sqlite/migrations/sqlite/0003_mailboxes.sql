-- graph-runtime SQLite schema 3: schedules, and each run's mailbox (the external events sent to it), one row a run:
-- `graph_store::mailbox::encode` bytes, changed only by the writer (read, apply, write back in one
-- transaction). A rowid table: a run's mailbox is written in place.
CREATE TABLE IF NOT EXISTS mailboxes (
    run_id TEXT NOT NULL PRIMARY KEY,
    bytes  BLOB NOT NULL
);

-- Schedules: `graph_store::schedule::encode` bytes by name, changed only by the writer.
CREATE TABLE IF NOT EXISTS schedules (
    name  TEXT NOT NULL PRIMARY KEY,
    bytes BLOB NOT NULL
);
