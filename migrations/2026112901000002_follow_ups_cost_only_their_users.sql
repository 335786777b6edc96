-- What follows a run's end (child jobs, the next workflow step) costs only the runs that
-- have one. The partial indexes below answer "does any job name followers?" and "is any
-- workflow step running?" with one lookup, so that `probactr_runs_advance`
-- (common/src/store/workflows/sql/functions/) passes over a group of ended runs without
-- looking at each when the answer is no; when it is yes, only the runs of jobs that name
-- followers are looked at for children.

-- Jobs that name jobs to start when they end.
CREATE INDEX jobs_with_followers ON jobs (id)
    WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}';

-- Steps whose run is in flight (what a run's end may advance).
CREATE INDEX workflow_run_steps_running ON workflow_run_steps (run_id)
    WHERE state = 'running';

