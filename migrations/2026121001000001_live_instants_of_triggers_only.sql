-- The live partition's instant index holds only runs a trigger fired.
--
-- `runs_trigger_instant` enforces invariant 1 (one first attempt per trigger instant)
-- while the first attempt is live. A run started by hand, by an API call, a parent job or
-- a workflow has no trigger: its NULL key can never conflict, yet every such run paid an
-- entry in the index when queued and another when claimed (the claim's update is not
-- HOT, so each index of the row gets a new entry). Lookups by trigger and instant name a
-- trigger, which implies the new predicate, so they still use the index. Trigger-fired
-- runs pay what they paid.
--
-- The history's `runs_done_trigger_instant` keeps its predicate: narrowing it would
-- rebuild the index over every stored day on upgrade.
DROP INDEX runs_trigger_instant;
CREATE UNIQUE INDEX runs_trigger_instant ON runs_live (trigger_id, scheduled_at, coalesce(shard, -1))
    WHERE attempt = 1 AND trigger_id IS NOT NULL;

-- Building an index records the partition's current size as its statistics: an empty
-- partition would be planned as empty, and a backlog read and sorted whole at every claim
-- until the next ANALYZE saw one. The sample statistics of migration 2026112901000001
-- are made again.
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
