-- Re-runs: a run started by hand with the parameters of an earlier one (`POST
-- /api/v1/runs/{id}/rerun`) records which run it repeats beside its other inputs. The
-- column is null for every other run: adding it rewrites nothing.
ALTER TABLE run_inputs ADD COLUMN rerun_of BIGINT;
COMMENT ON COLUMN run_inputs.rerun_of IS 'The run this one re-runs (same parameters), if any';
