-- graph-runtime schema 1 (MySQL / MariaDB, InnoDB). Applied by `MySqlStore::connect` under GET_LOCK;
-- each statement is idempotent (MySQL commits DDL implicitly, so a migration cut short is re-run whole).
-- Strings are utf8mb4 with the binary collation: byte order and case-sensitive, as the other stores.

-- One row per run. `row_bytes` is `record::encode_run` (the truth); the other columns are for queries.
CREATE TABLE IF NOT EXISTS graph_runs (
    run_id      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    status      VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    latest_step BIGINT NOT NULL,
    version     BIGINT NOT NULL,
    row_bytes   LONGBLOB NOT NULL,
    -- The run has a row in graph_pending: save_checkpoint deletes it only then (one statement less).
    has_pending BOOLEAN NOT NULL DEFAULT FALSE,
    -- list_runs with a status filter (WHERE status = ? ORDER BY run_id).
    KEY graph_runs_status (status, run_id)
) ENGINE = InnoDB;

-- One row per committed step. `record` is `record::encode`. The primary key serves load_checkpoint,
-- latest, checkpoints, history and prune (all by run, ordered or ranged by step).
CREATE TABLE IF NOT EXISTS graph_checkpoints (
    run_id   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    step     BIGINT NOT NULL,
    idem_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    record   LONGBLOB NOT NULL,
    PRIMARY KEY (run_id, step)
) ENGINE = InnoDB;

-- Idempotency keys, kept when their checkpoint is pruned. Inserted first by every commit: the primary
-- key is what makes a second commit of one key `AlreadyCommitted`.
CREATE TABLE IF NOT EXISTS graph_keys (
    idem_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    run_id   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    step     BIGINT NOT NULL
) ENGINE = InnoDB;

-- Event logs: `events::encode` bytes by (run, seq). The primary key serves events(run, from, limit).
CREATE TABLE IF NOT EXISTS graph_events (
    run_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    seq    BIGINT NOT NULL,
    bytes  LONGBLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
) ENGINE = InnoDB;

-- The pending step of a run (set_status with pending; cleared by the next save_checkpoint).
CREATE TABLE IF NOT EXISTS graph_pending (
    run_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    bytes  LONGBLOB NOT NULL
) ENGINE = InnoDB;

-- The effect journal: `journal::encode_effect` bytes by effect key (load_effect, put_effect); the
-- secondary index serves effects(run) ORDER BY step, path, call_index.
CREATE TABLE IF NOT EXISTS graph_effects (
    effect_key VARCHAR(700) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    run_id     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    step       BIGINT NOT NULL,
    path       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    call_index BIGINT NOT NULL,
    record     LONGBLOB NOT NULL,
    KEY graph_effects_run (run_id, step, path, call_index)
) ENGINE = InnoDB;

-- Unacknowledged outbox rows (`journal::encode_outbox`), written with their step's commit. The primary
-- key serves outbox(limit) (ORDER BY run_id, step, idx); the key index serves ack_outbox.
CREATE TABLE IF NOT EXISTS graph_outbox (
    run_id     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    step       BIGINT NOT NULL,
    idx        BIGINT NOT NULL,
    outbox_key VARCHAR(700) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    bytes      LONGBLOB NOT NULL,
    PRIMARY KEY (run_id, step, idx),
    KEY graph_outbox_key (outbox_key)
) ENGINE = InnoDB;
