-- Statistics for every column of the live partition, again.
--
-- Migration 20261124000001 gave `runs_live` statistics made from sample rows, so that the
-- claim is planned as an ordered walk of `runs_queued` from the first moment. The columns
-- added since (`priority`, `trigger_cap`, `claim_order`, `pinned_to`, `shard`,
-- `shard_total`, `replica`) had none: PostgreSQL then guesses that `pinned_to IS NULL`,
-- `trigger_cap IS NULL` and `replica IS NULL` each hold for half a percent of the rows, so
-- it expects the claim to find one queued run, and reads and sorts the whole backlog at
-- every claim instead. That tripled what PostgreSQL spent per run until the monitor's
-- next ANALYZE happened to see a backlog. The monitor analyzes an empty partition
-- without forgetting these statistics, so they hold until real rows replace them.
--
-- A migration that adds a column to `runs` must give it statistics the same way; a test
-- (`every_live_run_column_has_statistics`) fails otherwise.
DO $$
DECLARE
    first_job BIGINT;
BEGIN
    IF EXISTS (SELECT 1 FROM runs_live) THEN
        -- A cluster in use: its own rows are the best sample.
        ANALYZE runs_live;
        RETURN;
    END IF;
    INSERT INTO jobs (name, kind, parallel)
    SELECT 'probactr-statistics-sample-' || g, 'noop', true FROM generate_series(1, 100) AS g;
    SELECT min(id) INTO first_job FROM jobs WHERE name LIKE 'probactr-statistics-sample-%';
    INSERT INTO executors (id, host, pid, version)
    SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, 'sample', 0, 'sample'
    FROM generate_series(1, 20) AS g;
    -- A backlog and work in flight of many jobs and executors; no run uses a trigger cap,
    -- a pin, a shard or a service slot, as in most clusters.
    INSERT INTO runs (job_id, scheduled_at, available_at, state, executor_id, claimed_at, started_at)
    SELECT first_job + g % 100, now(), now() - make_interval(secs => g),
           CASE WHEN g % 10 < 4 THEN 'queued' WHEN g % 10 < 7 THEN 'claimed' ELSE 'running' END,
           CASE WHEN g % 10 < 4 THEN NULL
                ELSE ('00000000-0000-4000-8000-' || lpad((1 + g % 20)::text, 12, '0'))::uuid END,
           CASE WHEN g % 10 < 4 THEN NULL ELSE now() END,
           CASE WHEN g % 10 < 7 THEN NULL ELSE now() END
    FROM generate_series(1, 2000) AS g;
    ANALYZE runs_live;
    DELETE FROM runs_live;
    DELETE FROM executors WHERE host = 'sample' AND version = 'sample';
    DELETE FROM jobs WHERE name LIKE 'probactr-statistics-sample-%';
END $$;
