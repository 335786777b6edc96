-- Declared run parameters: a job's or a workflow's `params_schema`,
-- {NAME: {type, values, pattern, min, max, required, default, secret}} as the manager
-- checked and normalized it (common/src/params_schema.rs). NULL: parameters are free.
ALTER TABLE jobs ADD COLUMN params_schema JSONB;
ALTER TABLE workflows ADD COLUMN params_schema JSONB;
