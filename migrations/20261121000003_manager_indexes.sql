-- Indexes for the manager's read paths, so that their cost does not grow with the run
-- history.
--
-- (Job statistics read each job's latest runs from `runs_job_newest`, which includes
-- their state and queue time.)

-- The dashboard's and GET /api/v1/status's recent failures, newest first: found at once
-- however rare failures are among the other runs.
CREATE INDEX runs_failed_newest ON runs (id DESC) WHERE state IN ('failed', 'timed_out', 'abandoned');
