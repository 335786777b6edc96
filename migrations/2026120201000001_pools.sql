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
