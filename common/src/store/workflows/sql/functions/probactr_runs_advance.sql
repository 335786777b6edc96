-- probactr_runs_advance: current body (first defined in 2026112505000001_workflows.sql).
--
-- What a run's last attempt starts: the job's children, and the next steps of its
-- workflow run. Both cost only the runs that have them: whether any job names followers
-- and whether any workflow step runs is one lookup each in a partial index
-- (`jobs_with_followers`, `workflow_run_steps_running`, migration 2026112901000002), and
-- only the ended runs of jobs with followers are looked at for children. The statement
-- that finds the children costs about 0.1 ms even when it finds none: a quick look for
-- an ended run of a job with followers comes first, so that the ends of other jobs do
-- not pay it while some job has followers.
--
-- Each lookup asks for the first row in the index's order, which only the partial index
-- gives without reading the table, whatever the planner's statistics say. Asked whether
-- any row exists, the planner took a table never analyzed (autovacuum off, or not yet
-- come) for half full of followers and read all of `jobs` instead: 3.6 ms at every
-- recorded group with 10,000 jobs, against 0.01 ms.
CREATE OR REPLACE FUNCTION probactr_runs_advance() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ended RECORD;
    child RECORD;
    queued BIGINT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM inserted WHERE state NOT IN ('queued', 'claimed', 'running')) THEN
        RETURN NULL;
    END IF;
    IF (SELECT 1 FROM jobs WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}'
        ORDER BY id LIMIT 1) IS NOT NULL
       AND EXISTS (SELECT 1 FROM inserted AS last
                   WHERE last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
                     AND last.job_id IN (SELECT id FROM jobs
                                         WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}')) THEN
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
            queued := probactr_queue_run(child.job_id, 'child of run ' || child.parent_id);
            INSERT INTO run_inputs (run_id, params, parent_run_id)
            VALUES (queued, child.params, child.parent_id);
        END LOOP;
    END IF;
    IF (SELECT 1 FROM workflow_run_steps WHERE state = 'running' ORDER BY run_id LIMIT 1) IS NULL THEN
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
END $$;

CREATE OR REPLACE TRIGGER runs_advance
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_runs_advance();
