-- The live runs keep no foreign keys to `jobs` and `triggers`.
--
-- The keys checked each inserted run on its own: a lookup and a KEY SHARE lock of its
-- job and of its trigger, run as two trigger calls per row. For the firing's insert of
-- a thousand runs that was about a third of the statement (EXPLAIN ANALYZE: 19 of 64 ms),
-- although the firing already holds every trigger it fires (its claim locks them FOR
-- UPDATE) and so, by the triggers' own cascade, their jobs.
--
-- What the keys did is done once per statement:
-- - `probactr_check_run_keys` (after an insert into `runs`) locks the distinct jobs and
--   triggers of the runs entering the live partition KEY SHARE and refuses a missing one
--   (SQLSTATE 23503), as the checks did;
-- - `probactr_erase_job_runs` replaces `probactr_erase_job_history`: deleting jobs
--   deletes their live runs (the key's ON DELETE CASCADE) and their history;
-- - `probactr_forget_trigger` replaces `probactr_forget_trigger_in_history`: deleting
--   triggers clears them from live runs and history alike (ON DELETE SET NULL).
ALTER TABLE runs_live DROP CONSTRAINT runs_live_job_id_fkey;
ALTER TABLE runs_live DROP CONSTRAINT runs_live_trigger_id_fkey;

DROP TRIGGER jobs_erase_history ON jobs;
DROP FUNCTION probactr_erase_job_history();
DROP TRIGGER triggers_forget_in_history ON triggers;
DROP FUNCTION probactr_forget_trigger_in_history();
