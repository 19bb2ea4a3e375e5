-- graph-runtime schema 3 (PostgreSQL): a commit group in one statement (`store::server::postgres::group`).
-- A group written with BEGIN, two statements and COMMIT cost four round trips, each ~0.1-0.2 ms on a busy
-- machine; called as one statement, in the implicit transaction of its own, this function costs one
-- (docs/stores.md, "One round trip a group"). Its writes are the same as the two statements'. It checks
-- each run row against the bytes the caller computed the commit from (`p_prior`, NULL: no row), so the
-- caller's copy of a row is never trusted: a row that changed since is a commit not written.
--
-- Returns the runs whose commit was written. A commit not written (its key existed, its run row was not
-- `p_prior`, its lease was not live, its step was taken) leaves nothing: its key row, if this call
-- inserted it, is deleted; the caller commits it alone, which answers why.
CREATE OR REPLACE FUNCTION graph_commit_group(
    p_keys TEXT[], p_runs TEXT[], p_steps BIGINT[], p_records BYTEA[], p_prior BYTEA[],
    p_statuses TEXT[], p_latest BIGINT[], p_versions BIGINT[], p_rows BYTEA[],
    p_outbox_runs TEXT[], p_outbox_steps BIGINT[], p_outbox_idx BIGINT[], p_outbox_keys TEXT[],
    p_outbox_bytes BYTEA[],
    p_event_runs TEXT[], p_event_seqs BIGINT[], p_event_bytes BYTEA[],
    p_fence_runs TEXT[], p_fence_owners TEXT[], p_fence_tokens BIGINT[]
) RETURNS TEXT[] LANGUAGE plpgsql AS $$
DECLARE
    l_keyed TEXT[];
    l_matched TEXT[];
    l_pending TEXT[];
    l_written TEXT[];
BEGIN
    -- 1. The keys, first (a key that exists, or that a concurrent transaction holds and then commits,
    -- is not returned); then the run row of each keyed commit locked, in the caller's order (by run:
    -- two groups lock the rows they share in the same order), and compared with the row the commit
    -- was computed from.
    WITH k AS (INSERT INTO graph_keys (idem_key, run_id, step)
            SELECT * FROM unnest(p_keys, p_runs, p_steps) ON CONFLICT DO NOTHING RETURNING run_id)
    SELECT (SELECT coalesce(array_agg(run_id), '{}') FROM k),
           coalesce(array_agg(t.run_id), '{}'),
           coalesce(array_agg(t.run_id) FILTER (WHERE r.has_pending), '{}')
      INTO l_keyed, l_matched, l_pending
      FROM (SELECT u.run_id, u.prior FROM unnest(p_runs, p_prior) AS u (run_id, prior)
            WHERE u.run_id IN (SELECT run_id FROM k)) AS t
      LEFT JOIN LATERAL (SELECT g.row_bytes, g.has_pending FROM graph_runs g
            WHERE g.run_id = t.run_id FOR UPDATE) AS r ON TRUE
     WHERE r.row_bytes IS NOT DISTINCT FROM t.prior;
    -- 2. A commit under a worker's lease: written only while that lease is the run's live one (read
    -- after the row lock, as a single commit's fencing check).
    IF cardinality(p_fence_runs) > 0 THEN
        SELECT coalesce(array_agg(m.run_id), '{}') INTO l_matched
          FROM unnest(l_matched) AS m (run_id)
         WHERE NOT m.run_id = ANY(p_fence_runs)
            OR EXISTS (SELECT 1 FROM unnest(p_fence_runs, p_fence_owners, p_fence_tokens) AS f (run_id, owner, token)
                  JOIN graph_leases l ON l.run_id = f.run_id AND l.owner = f.owner AND l.token = f.token
                 WHERE f.run_id = m.run_id AND l.owner <> '' AND l.expires_at > clock_timestamp());
    END IF;
    -- 3. The checkpoints (a step already taken writes nothing) and, for those written, their outbox
    -- rows, events, pending steps and run rows.
    WITH c AS (INSERT INTO graph_checkpoints (run_id, step, idem_key, record)
            SELECT t.run_id, t.step, t.idem_key, t.record
              FROM unnest(p_runs, p_steps, p_keys, p_records) AS t (run_id, step, idem_key, record)
             WHERE t.run_id = ANY(l_matched)
            ON CONFLICT DO NOTHING RETURNING run_id),
         o AS (INSERT INTO graph_outbox (run_id, step, idx, outbox_key, bytes)
            SELECT t.* FROM unnest(p_outbox_runs, p_outbox_steps, p_outbox_idx, p_outbox_keys, p_outbox_bytes)
                AS t (run_id, step, idx, outbox_key, bytes)
             WHERE t.run_id IN (SELECT run_id FROM c)
            ON CONFLICT (run_id, step, idx) DO UPDATE SET outbox_key = EXCLUDED.outbox_key, bytes = EXCLUDED.bytes),
         e AS (INSERT INTO graph_events (run_id, seq, bytes)
            SELECT t.* FROM unnest(p_event_runs, p_event_seqs, p_event_bytes) AS t (run_id, seq, bytes)
             WHERE t.run_id IN (SELECT run_id FROM c)
            ON CONFLICT (run_id, seq) DO UPDATE SET bytes = EXCLUDED.bytes),
         p AS (DELETE FROM graph_pending WHERE run_id = ANY(l_pending) AND run_id IN (SELECT run_id FROM c)),
         v AS (SELECT * FROM unnest(p_runs, p_prior, p_statuses, p_latest, p_versions, p_rows)
                AS v (run_id, prior, status, latest_step, version, row_bytes)
             WHERE v.run_id IN (SELECT run_id FROM c)),
         u AS (UPDATE graph_runs g SET status = v.status, latest_step = v.latest_step, version = v.version,
                row_bytes = v.row_bytes, has_pending = FALSE
             FROM v WHERE g.run_id = v.run_id AND v.prior IS NOT NULL),
         n AS (INSERT INTO graph_runs (status, latest_step, version, row_bytes, has_pending, run_id)
             SELECT v.status, v.latest_step, v.version, v.row_bytes, FALSE, v.run_id FROM v WHERE v.prior IS NULL)
    SELECT coalesce(array_agg(run_id), '{}') INTO l_written FROM c;
    -- 4. The keys this call inserted for commits it did not write.
    IF cardinality(l_written) < cardinality(l_keyed) THEN
        DELETE FROM graph_keys g USING unnest(p_keys, p_runs) AS t (idem_key, run_id)
         WHERE g.idem_key = t.idem_key AND g.run_id = t.run_id
           AND t.run_id = ANY(l_keyed) AND NOT t.run_id = ANY(l_written);
    END IF;
    RETURN l_written;
END
$$;
