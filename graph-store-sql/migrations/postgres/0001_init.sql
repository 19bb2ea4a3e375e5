-- graph-runtime schema 1 (PostgreSQL). Applied by `PostgresStore::connect` under pg_advisory_lock; each
-- statement is idempotent. Run ids, keys and paths use the "C" collation: byte order, as the other stores.

-- One row per run. `row_bytes` is `record::encode_run` (the truth); the other columns are for queries.
CREATE TABLE IF NOT EXISTS graph_runs (
    run_id      TEXT COLLATE "C" PRIMARY KEY,
    status      TEXT NOT NULL,
    latest_step BIGINT NOT NULL,
    version     BIGINT NOT NULL,
    row_bytes   BYTEA NOT NULL,
    -- The run has a row in graph_pending: save_checkpoint deletes it only then (one statement less).
    has_pending BOOLEAN NOT NULL DEFAULT FALSE
);
-- list_runs with a status filter (WHERE status = $1 ORDER BY run_id).
CREATE INDEX IF NOT EXISTS graph_runs_status ON graph_runs (status, run_id);

-- One row per committed step. `record` is `record::encode`. The primary key serves load_checkpoint,
-- latest, checkpoints, history and prune (all by run, ordered or ranged by step).
CREATE TABLE IF NOT EXISTS graph_checkpoints (
    run_id   TEXT COLLATE "C" NOT NULL,
    step     BIGINT NOT NULL,
    idem_key TEXT NOT NULL,
    record   BYTEA NOT NULL,
    PRIMARY KEY (run_id, step)
);

-- Idempotency keys, kept when their checkpoint is pruned. Inserted first by every commit: the primary
-- key is what makes a second commit of one key `AlreadyCommitted`.
CREATE TABLE IF NOT EXISTS graph_keys (
    idem_key TEXT COLLATE "C" PRIMARY KEY,
    run_id   TEXT COLLATE "C" NOT NULL,
    step     BIGINT NOT NULL
);

-- Event logs: `events::encode` bytes by (run, seq). The primary key serves events(run, from, limit).
CREATE TABLE IF NOT EXISTS graph_events (
    run_id TEXT COLLATE "C" NOT NULL,
    seq    BIGINT NOT NULL,
    bytes  BYTEA NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- The pending step of a run (set_status with pending; cleared by the next save_checkpoint).
CREATE TABLE IF NOT EXISTS graph_pending (
    run_id TEXT COLLATE "C" PRIMARY KEY,
    bytes  BYTEA NOT NULL
);

-- The effect journal: `journal::encode_effect` bytes by effect key (load_effect, put_effect).
CREATE TABLE IF NOT EXISTS graph_effects (
    effect_key TEXT COLLATE "C" PRIMARY KEY,
    run_id     TEXT COLLATE "C" NOT NULL,
    step       BIGINT NOT NULL,
    path       TEXT COLLATE "C" NOT NULL,
    call_index BIGINT NOT NULL,
    record     BYTEA NOT NULL
);
-- effects(run) ORDER BY step, path, call_index.
CREATE INDEX IF NOT EXISTS graph_effects_run ON graph_effects (run_id, step, path, call_index);

-- Unacknowledged outbox rows (`journal::encode_outbox`), written with their step's commit. The primary
-- key serves outbox(limit) (ORDER BY run_id, step, idx); the key index serves ack_outbox.
CREATE TABLE IF NOT EXISTS graph_outbox (
    run_id     TEXT COLLATE "C" NOT NULL,
    step       BIGINT NOT NULL,
    idx        BIGINT NOT NULL,
    outbox_key TEXT COLLATE "C" NOT NULL,
    bytes      BYTEA NOT NULL,
    PRIMARY KEY (run_id, step, idx)
);
CREATE INDEX IF NOT EXISTS graph_outbox_key ON graph_outbox (outbox_key);
