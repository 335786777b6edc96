-- The running runs of executor $1 whose stop was asked: what its executor polls for. Read
-- from `runs_cancel_requested`, which holds only such runs, not from all of the
-- executor's runs in flight.
SELECT id FROM runs_live
WHERE executor_id = $1 AND state = 'running' AND cancel_requested_at IS NOT NULL
