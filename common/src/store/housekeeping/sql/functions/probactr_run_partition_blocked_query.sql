-- probactr_run_partition_blocked_query: current body (first defined in 2026112801000001_history_without_foreign_keys.sql).
--
-- The query telling whether a day of ended runs must be kept past the retention: a run
-- queued after the cutoff ($1), or a first attempt whose retry is still live.
CREATE OR REPLACE FUNCTION probactr_run_partition_blocked_query(part TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT format('SELECT EXISTS (SELECT 1 FROM %I WHERE queued_at >= $1)
                       OR EXISTS (SELECT 1 FROM runs_live JOIN %I AS done ON done.id = runs_live.first_run_id)',
                  part, part)
$$;
