-- probactr_queue_run: how the database's own functions queue a run (a workflow's step in
-- `probactr_workflow_start_step`, a child job in `probactr_runs_advance`), so that every
-- birth of a run is written in `store/runs/`, beside the ones the Rust code makes.
--
-- Queues a first attempt of `job`, claimable now, with `why` as its reason; returns its id.
CREATE OR REPLACE FUNCTION probactr_queue_run(job BIGINT, why TEXT) RETURNS BIGINT
LANGUAGE sql VOLATILE AS $$
    INSERT INTO runs (job_id, scheduled_at, reason) VALUES (job, now(), why) RETURNING id
$$;
