-- probactr_rate_stamp: current body (first defined with migration 2026120303000001).
--
-- The starts a rate keeps after a claim took `taken` runs under it now: the N latest of
-- those kept and the new ones (N, the rate's limit, is all the claim's count needs: a
-- window holding N starts is full whichever are older). When that leaves the window
-- full, the instant it opens again (the oldest kept start plus S seconds) is announced
-- on `probactr_runs_at`, so that executors claim the waiting runs then rather than at
-- their next look. Called by the claim for the rows it locked of pools and jobs with a
-- rate only.
CREATE OR REPLACE FUNCTION probactr_rate_stamp(rate JSONB, starts TIMESTAMPTZ[], taken BIGINT)
RETURNS TIMESTAMPTZ[] LANGUAGE plpgsql AS $$
DECLARE
    kept TIMESTAMPTZ[];
BEGIN
    SELECT coalesce(array_agg(started ORDER BY started), '{}') INTO kept
    FROM (SELECT started FROM (SELECT unnest(starts) AS started
                               UNION ALL SELECT now() FROM generate_series(1, taken)) AS every_start
          ORDER BY started DESC LIMIT (rate ->> 'limit')::int) AS latest;
    IF probactr_rate_room(rate, kept) = 0 THEN
        PERFORM pg_notify('probactr_runs_at', ceil(extract(epoch FROM kept[1]
            + make_interval(secs => (rate ->> 'per_secs')::int)) * 1000)::bigint::text);
    END IF;
    RETURN kept;
END $$;
