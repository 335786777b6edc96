-- probactr_run_params: current body (first defined in 2026112505000001_workflows.sql).
--
-- The parameters a run sees: its trigger's defaults under its own.
CREATE OR REPLACE FUNCTION probactr_run_params(chain_id BIGINT, trigger BIGINT) RETURNS JSONB
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT params FROM triggers WHERE id = trigger), '{}'::jsonb)
           || coalesce((SELECT params FROM run_inputs WHERE run_id = chain_id), '{}'::jsonb)
$$;
