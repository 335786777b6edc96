-- Flow control across jobs: a trigger's `max_concurrency` held exactly.
--
-- Before, the claim counted the trigger's runs in flight in its statement snapshot, which
-- two claimers committing at once could both pass. Now the trigger's cap is held like a
-- namespace's `max_running` (migration 2026120102000001): `triggers.running` counts the
-- trigger's runs a claim counted and that are still claimed or running; the claim locks
-- the row of each capped trigger it takes runs of, takes no more than
-- `max_concurrency - running` and adds what it took, marking each such run with
-- `runs.quota_trigger`. A marked run leaving claimed/running gives its place back through
-- `probactr_quota_release` (common/src/store/runs/sql/functions/), whose WHEN clauses
-- test the run's own columns only: runs of triggers without a cap pay nothing.
ALTER TABLE triggers ADD COLUMN running INTEGER NOT NULL DEFAULT 0;

-- The trigger whose cap counts this run while it is claimed or running (NULL: none).
ALTER TABLE runs ADD COLUMN quota_trigger BIGINT;

-- The runs of capped triggers already in flight are counted from now on.
WITH marked AS (
    UPDATE runs_live SET quota_trigger = trigger_id
    WHERE state IN ('claimed', 'running') AND trigger_cap IS NOT NULL AND trigger_id IS NOT NULL
    RETURNING quota_trigger)
UPDATE triggers SET running = held.runs
FROM (SELECT quota_trigger, count(*) AS runs FROM marked GROUP BY quota_trigger) AS held
WHERE triggers.id = held.quota_trigger;

-- The claim no longer counts a trigger's runs in flight.
DROP INDEX runs_active_by_trigger;

-- Pools: a scarce thing jobs share (a licence server, a database that tolerates three
-- exports at once). A job takes `pool` and weighs `pool_slots` in it; however many
-- executors claim at once, the runs holding a pool's slots never weigh more than its
-- `slots`. Held like the caps above: `pools.used` is the weight of the runs a claim
-- counted and that are still claimed or running; the claim locks the pool's row, takes
-- runs within `slots - used`, adds their weight and marks each run (`runs.quota_pool`,
-- `runs.quota_pool_slots`); the run gives its slots back on leaving claimed/running (so
-- a run of a dead executor holds them until it is reaped or taken over).
CREATE TABLE pools (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace  TEXT NOT NULL DEFAULT 'default' REFERENCES namespaces (name),
    name       TEXT NOT NULL,
    slots      INTEGER NOT NULL,
    used       INTEGER NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT pools_name_unique UNIQUE (namespace, name),
    CONSTRAINT pools_name_valid CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    CONSTRAINT pools_slots_positive CHECK (slots >= 1)
);

-- A job's pool is one of its namespace's; a pool used by a job cannot be deleted.
ALTER TABLE jobs ADD COLUMN pool TEXT;
ALTER TABLE jobs ADD COLUMN pool_slots INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD CONSTRAINT jobs_pool_slots_positive CHECK (pool_slots >= 1);
ALTER TABLE jobs ADD CONSTRAINT jobs_pool_fkey FOREIGN KEY (namespace, pool) REFERENCES pools (namespace, name);
CREATE INDEX jobs_pool ON jobs (namespace, pool) WHERE pool IS NOT NULL;

-- The pool whose slots this run holds while claimed or running, and how many (NULL: none).
ALTER TABLE runs ADD COLUMN quota_pool BIGINT;
ALTER TABLE runs ADD COLUMN quota_pool_slots INTEGER;

-- Statistics for the new columns of the live partition, made as in migration
-- 2026120102000001 (the claim's plan depends on every column having some).
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
