-- The per-job counters are kept by one trigger function, `probactr_job_stats_count`,
-- that reads the ended runs from its transition table in the statement that counts
-- them. The two trigger functions it replaces handed the rows to a third,
-- `probactr_job_stats_add`, as arrays: that call cost each group of ends about as much
-- again as the counting itself.
--
-- The triggers go with their functions here and come back, under the same names, with
-- the new function (installed after the migrations, `store::functions`).
DROP TRIGGER runs_stats_inserted ON runs;
DROP TRIGGER runs_stats_updated ON runs;
DROP FUNCTION probactr_job_stats_inserted();
DROP FUNCTION probactr_job_stats_updated();
DROP FUNCTION probactr_job_stats_add(BIGINT[], BIGINT[], TEXT[], TIMESTAMPTZ[], TIMESTAMPTZ[]);
