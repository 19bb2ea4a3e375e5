-- graph-runtime schema 2 (PostgreSQL): leases of runs to workers (`store::server::lease`).
-- Schema 2 belongs to another change; the runner applies every version the database lacks, in order, so
-- a database at 1 gets 3 now and 2 when a build that has it connects. Each statement is idempotent.

-- One row per run a worker ever claimed. Rows are never deleted: `token` (the fencing token) only grows,
-- and a deleted row would restart it at 1, letting a stale holder's token match again.
-- `owner` is '' once released. `expires_at` is in the database's clock (now()), never a worker's.
CREATE TABLE IF NOT EXISTS graph_leases (
    run_id     TEXT COLLATE "C" PRIMARY KEY,
    owner      TEXT NOT NULL,
    token      BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

-- Every claim, written in the claim's transaction: who took which token of a run, when (database time),
-- and when the lease it replaced ran out (NULL: first claim; at or before claimed_at, or released).
-- For audits and tests ("no two workers held a run at once"); prune with
-- DELETE FROM graph_lease_claims WHERE claimed_at < ... when it is no longer wanted.
CREATE TABLE IF NOT EXISTS graph_lease_claims (
    run_id        TEXT COLLATE "C" NOT NULL,
    token         BIGINT NOT NULL,
    owner         TEXT NOT NULL,
    claimed_at    TIMESTAMPTZ NOT NULL,
    prev_owner    TEXT,
    prev_expires  TIMESTAMPTZ,
    PRIMARY KEY (run_id, token)
);
