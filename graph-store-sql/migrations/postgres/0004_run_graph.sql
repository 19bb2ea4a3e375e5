-- graph-runtime schema 4 (PostgreSQL): the graph of each run, for claims. Each statement is idempotent.
--
-- A worker resumes runs with its own graph; before this column a claim took any runnable run, and a run
-- of another graph failed its fingerprint check, was released and claimed again at once (a busy loop that
-- also grew graph_lease_claims by a row a claim). `graph_fingerprint` is the graph fingerprint the run
-- started with (it never changes), written with the row by a run's first commit made alone; NULL for
-- rows written before schema 4 or by a commit group, until a claim reads it from `row_bytes` (claims
-- fill it in for the runs they look at, `store::server::lease`).
ALTER TABLE graph_runs ADD COLUMN IF NOT EXISTS graph_fingerprint TEXT COLLATE "C";
-- Claims: the runnable runs of one graph in run-id order, and the runnable runs not yet looked at
-- (graph_fingerprint IS NULL).
CREATE INDEX IF NOT EXISTS graph_runs_claim ON graph_runs (status, graph_fingerprint, run_id);
