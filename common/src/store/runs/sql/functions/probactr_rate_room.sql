-- probactr_rate_room: current body (first defined with migration 2026120303000001).
--
-- How many more starts a rate (`{"limit": N, "per_secs": S}`) allows now, given the
-- latest starts kept for it (`pools.rate_starts`, `job_rate_windows.starts`): N less
-- the starts within the last S seconds, never below 0. Called by the claim
-- (`claim_queued.sql`) for the runs of pools and jobs with a rate only, and by the
-- reasons shown on a waiting run.
CREATE OR REPLACE FUNCTION probactr_rate_room(rate JSONB, starts TIMESTAMPTZ[]) RETURNS INTEGER
LANGUAGE sql STABLE AS $$
    SELECT greatest(0, (rate ->> 'limit')::int - (
        SELECT count(*)::int FROM unnest(starts) AS started
        WHERE started > now() - make_interval(secs => (rate ->> 'per_secs')::int)))
$$;
