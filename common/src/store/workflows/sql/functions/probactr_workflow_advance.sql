-- probactr_workflow_advance: current body (first defined in 2026112505000001_workflows.sql).
--
-- Starts every pending step whose upstream steps are all done and whose `when` holds,
-- skips those whose `when` cannot hold any more (and so, in turn, the steps that need
-- them), and ends the workflow run once no step is pending or running. The caller holds
-- the workflow run's row lock, so two steps ending at once advance it one after the other.
CREATE OR REPLACE FUNCTION probactr_workflow_advance(target BIGINT) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    changed BOOLEAN := TRUE;
    step RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM workflow_runs WHERE id = target AND state = 'running') THEN
        RETURN;
    END IF;
    WHILE changed LOOP
        changed := FALSE;
        FOR step IN
            SELECT s.name, s.run_when,
                   count(u.name) AS upstream,
                   count(u.name) FILTER (WHERE u.state IN ('pending', 'running')) AS waiting,
                   count(u.name) FILTER (WHERE u.state = 'succeeded') AS succeeded,
                   count(u.name) FILTER (WHERE u.state IN ('failed', 'cancelled')) AS failed
            FROM workflow_run_steps AS s
            LEFT JOIN workflow_run_steps AS u
                   ON u.workflow_run_id = s.workflow_run_id AND u.name = ANY (s.depends_on)
            WHERE s.workflow_run_id = target AND s.state = 'pending'
            GROUP BY s.name, s.run_when, s.position
            ORDER BY s.position
        LOOP
            CONTINUE WHEN step.waiting > 0;
            IF (step.run_when = 'all_success' AND step.succeeded = step.upstream)
               OR step.run_when = 'all_done'
               OR (step.run_when = 'any_failed' AND step.failed > 0) THEN
                PERFORM probactr_workflow_start_step(target, step.name);
            ELSE
                UPDATE workflow_run_steps SET state = 'skipped', finished_at = now()
                WHERE workflow_run_id = target AND name = step.name;
            END IF;
            changed := TRUE;
        END LOOP;
    END LOOP;
    UPDATE workflow_runs
    SET state = CASE WHEN EXISTS (SELECT 1 FROM workflow_run_steps
                                  WHERE workflow_run_id = target AND state IN ('failed', 'cancelled'))
                     THEN 'failed' ELSE 'succeeded' END,
        finished_at = now()
    WHERE id = target AND state = 'running'
      AND NOT EXISTS (SELECT 1 FROM workflow_run_steps
                      WHERE workflow_run_id = target AND state IN ('pending', 'running'));
END $$;
