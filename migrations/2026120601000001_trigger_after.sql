-- Dependencies across schedules: a trigger may wait for another job (`after`).
--
-- Each instant's run of such a trigger is inserted queued but not claimable
-- (`available_at` in the year 9999), with a row in `run_waits` saying which job's run of which
-- day it waits for and until when. The monitors release it when that run succeeded, or
-- end it failed at the deadline. Only waiting runs have a row, so the monitors' pass reads
-- nothing else, and runs of other triggers pay nothing.
ALTER TABLE triggers ADD COLUMN after_job_id BIGINT;
ALTER TABLE triggers ADD COLUMN after_within_secs INTEGER;
-- Deleting the job waited for drops the dependency (the trigger fires without waiting;
-- `after_within_secs` alone means nothing).
ALTER TABLE triggers ADD CONSTRAINT triggers_after_job FOREIGN KEY (after_job_id)
    REFERENCES jobs (id) ON DELETE SET NULL;
ALTER TABLE triggers ADD CONSTRAINT triggers_after_whole
    CHECK (after_job_id IS NULL OR after_within_secs IS NOT NULL);
ALTER TABLE triggers ADD CONSTRAINT triggers_after_within_positive
    CHECK (after_within_secs IS NULL OR after_within_secs >= 1);
CREATE INDEX triggers_after_job ON triggers (after_job_id) WHERE after_job_id IS NOT NULL;

-- A waiting run: the job it waits for, the day (`[day_start, day_end)` in the trigger's
-- time zone) a run of that job must be scheduled in and have succeeded, the moment it
-- gives up, and its reason ("waiting for nightly-load of 2026-11-25").
CREATE TABLE run_waits (
    run_id          BIGINT PRIMARY KEY,
    upstream_job_id BIGINT NOT NULL,
    day_start       TIMESTAMPTZ NOT NULL,
    day_end         TIMESTAMPTZ NOT NULL,
    deadline        TIMESTAMPTZ NOT NULL,
    reason          TEXT NOT NULL
);
