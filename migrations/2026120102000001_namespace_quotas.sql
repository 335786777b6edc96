-- A namespace's `max_running` held exactly, at no cost to runs of namespaces without one.
--
-- `namespaces.running` counts the namespace's runs that a claim counted against its quota
-- and that are still claimed or running. The claim locks the row of each capped namespace
-- it takes runs of (`FOR UPDATE`: after waiting, the latest committed count, whatever the
-- statement's snapshot), takes no more than `max_running - running` of them and adds what
-- it took; it marks each such run with `runs.quota_namespace`. A marked run leaving
-- claimed/running (ended, unclaimed, re-queued, deleted) gives its place back through a row
-- trigger whose WHEN clause tests that column only, so unmarked runs pay nothing
-- (`probactr_quota_release`, common/src/store/runs/sql/functions/).
ALTER TABLE namespaces ADD COLUMN running INTEGER NOT NULL DEFAULT 0;

-- Whether the job's namespace has a `max_running`: the claim and the firing test this
-- column of the job they already read instead of looking the namespace up for every run
-- (kept by `probactr_namespace_capped`).
ALTER TABLE jobs ADD COLUMN namespace_capped BOOLEAN NOT NULL DEFAULT false;
UPDATE jobs SET namespace_capped = true
WHERE namespace IN (SELECT name FROM namespaces WHERE max_running IS NOT NULL);

-- The namespace whose quota counts this run while it is claimed or running (NULL: none).
ALTER TABLE runs ADD COLUMN quota_namespace TEXT;

-- Statistics for the new column of the live partition, made as in migration
-- 2026112901000001 (the claim's plan depends on every column having some).
DO $$
DECLARE
    first_job BIGINT;
BEGIN
    IF EXISTS (SELECT 1 FROM runs_live) THEN
        ANALYZE runs_live;
        RETURN;
    END IF;
    INSERT INTO jobs (name, kind, parallel)
    SELECT 'probactr-statistics-sample-' || g, 'noop', true FROM generate_series(1, 100) AS g;
    SELECT min(id) INTO first_job FROM jobs WHERE name LIKE 'probactr-statistics-sample-%';
    INSERT INTO executors (id, host, pid, version)
    SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, 'sample', 0, 'sample'
    FROM generate_series(1, 20) AS g;
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
