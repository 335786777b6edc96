-- What follows a run's end (child jobs, the next workflow step) costs only the runs that
-- have one. The partial indexes below answer "does any job name followers?" and "is
-- any workflow step running?" with one lookup, so that `probactr_runs_advance` passes
-- over a group of ended runs without looking at each when the answer is no; when it is
-- yes, only the runs of jobs that name followers are looked at for children.

-- Jobs that name jobs to start when they end.
CREATE INDEX jobs_with_followers ON jobs (id)
    WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}';

-- Steps whose run is in flight (what a run's end may advance).
CREATE INDEX workflow_run_steps_running ON workflow_run_steps (run_id)
    WHERE state = 'running';

-- Ending runs: child jobs queued, workflow steps advanced (see above).
CREATE OR REPLACE FUNCTION probactr_runs_advance()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    ended RECORD;
    child RECORD;
    queued BIGINT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM inserted WHERE state NOT IN ('queued', 'claimed', 'running')) THEN
        RETURN NULL;
    END IF;
    -- Child jobs: nothing to look at unless some job names followers (one lookup in
    -- jobs_with_followers); then only the ended runs of such jobs are looked at.
    IF EXISTS (SELECT 1 FROM jobs WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}') THEN
    FOR child IN
        WITH parents AS MATERIALIZED (
            SELECT last.* FROM inserted AS last
            WHERE last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
              AND last.job_id IN (SELECT id FROM jobs
                                  WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}'))
        SELECT last.id AS parent_id, children.job_id,
               probactr_run_params(coalesce(last.first_run_id, last.id), last.trigger_id) AS params
        FROM parents AS last
        JOIN jobs ON jobs.id = last.job_id
        CROSS JOIN LATERAL (
            SELECT DISTINCT listed.job_id
            FROM unnest(CASE WHEN last.state = 'succeeded' THEN jobs.on_success ELSE '{}' END
                        || CASE WHEN last.state IN ('failed', 'timed_out', 'abandoned') THEN jobs.on_failure ELSE '{}' END
                        || CASE WHEN last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
                                THEN jobs.on_finish ELSE '{}' END) AS listed (job_id)
            JOIN jobs AS present ON present.id = listed.job_id) AS children
        WHERE last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
          AND (jobs.on_success <> '{}' OR jobs.on_failure <> '{}' OR jobs.on_finish <> '{}')
          AND NOT EXISTS (SELECT 1 FROM runs AS later
                          WHERE later.first_run_id = coalesce(last.first_run_id, last.id)
                            AND later.attempt > last.attempt)
        ORDER BY last.id, children.job_id
    LOOP
        INSERT INTO runs (job_id, scheduled_at, reason)
        VALUES (child.job_id, now(), 'child of run ' || child.parent_id)
        RETURNING id INTO queued;
        INSERT INTO run_inputs (run_id, params, parent_run_id)
        VALUES (queued, child.params, child.parent_id);
    END LOOP;
    END IF;
    -- Workflow steps: nothing to advance unless a step is running (one lookup in
    -- workflow_run_steps_running).
    IF NOT EXISTS (SELECT 1 FROM workflow_run_steps WHERE state = 'running') THEN
        RETURN NULL;
    END IF;
    FOR ended IN
        SELECT inputs.workflow_run_id, inputs.step_name, inputs.run_id AS chain_id,
               last.id AS attempt_id, last.state
        FROM inserted AS last
        JOIN run_inputs AS inputs ON inputs.run_id = coalesce(last.first_run_id, last.id)
        WHERE last.state NOT IN ('queued', 'claimed', 'running')
          AND inputs.workflow_run_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM runs AS later
                          WHERE later.first_run_id = coalesce(last.first_run_id, last.id)
                            AND later.attempt > last.attempt)
        ORDER BY inputs.workflow_run_id, inputs.step_name
    LOOP
        -- The workflow run's lock first, then the step: a concurrent end of another step
        -- waits here and then sees this one's end.
        PERFORM 1 FROM workflow_runs WHERE id = ended.workflow_run_id FOR UPDATE;
        UPDATE workflow_run_steps
        SET state = CASE ended.state WHEN 'succeeded' THEN 'succeeded'
                                     WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END,
            output = (SELECT output FROM run_outputs WHERE run_id = ended.attempt_id),
            finished_at = now()
        WHERE workflow_run_id = ended.workflow_run_id AND name = ended.step_name
          AND run_id = ended.chain_id AND state = 'running';
        IF FOUND THEN
            PERFORM probactr_workflow_advance(ended.workflow_run_id);
        END IF;
    END LOOP;
    RETURN NULL;
END $function$;
