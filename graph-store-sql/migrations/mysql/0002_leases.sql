-- graph-runtime schema 2 (MySQL / MariaDB): leases of runs to workers (`store::server::lease`).
-- Schema 2 belongs to another change; the runner applies every version the database lacks, in order, so
-- a database at 1 gets 3 now and 2 when a build that has it connects. Each statement is idempotent.

-- One row per run a worker ever claimed. Rows are never deleted: `token` (the fencing token) only grows,
-- and a deleted row would restart it at 1, letting a stale holder's token match again.
-- `owner` is '' once released. `expires_at` is in the database's clock (CURRENT_TIMESTAMP(6)).
CREATE TABLE IF NOT EXISTS graph_leases (
    run_id     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    owner      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    token      BIGINT NOT NULL,
    expires_at DATETIME(6) NOT NULL
) ENGINE = InnoDB;

-- Every claim, written in the claim's transaction: who took which token of a run, when (database time),
-- and when the lease it replaced ran out (NULL: first claim; at or before claimed_at, or released).
-- For audits and tests ("no two workers held a run at once"); prune with
-- DELETE FROM graph_lease_claims WHERE claimed_at < ... when it is no longer wanted.
CREATE TABLE IF NOT EXISTS graph_lease_claims (
    run_id       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    token        BIGINT NOT NULL,
    owner        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    claimed_at   DATETIME(6) NOT NULL,
    prev_owner   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    prev_expires DATETIME(6) NULL,
    PRIMARY KEY (run_id, token)
) ENGINE = InnoDB;
