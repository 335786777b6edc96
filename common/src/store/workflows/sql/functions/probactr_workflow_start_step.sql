-- probactr_workflow_start_step: current body (first defined in 2026112505000001_workflows.sql).
--
-- Queues the run of a step and marks it running; returns the run.
CREATE OR REPLACE FUNCTION probactr_workflow_start_step(target BIGINT, step TEXT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    queued BIGINT;
    step_job BIGINT;
    given JSONB;
BEGIN
    SELECT s.job_id, w.params || s.params INTO step_job, given
    FROM workflow_run_steps AS s JOIN workflow_runs AS w ON w.id = s.workflow_run_id
    WHERE s.workflow_run_id = target AND s.name = step;
    queued := probactr_queue_run(step_job, 'workflow run ' || target || ', step ' || step);
    INSERT INTO run_inputs (run_id, params, workflow_run_id, step_name)
    VALUES (queued, given, target, step);
    UPDATE workflow_run_steps
    SET state = 'running', run_id = queued, run_ids = run_ids || queued, output = NULL,
        started_at = now(), finished_at = NULL
    WHERE workflow_run_id = target AND name = step;
    RETURN queued;
END $$;
