-- The live runs keep no foreign key to `executors`.
--
-- The claim is the statement that sets `executor_id`, and it already gives runs only to
-- an executor whose row is alive (its EXISTS on `executors`). The key checked the same
-- row again for each claimed run: a lookup and a KEY SHARE lock on the executor's row,
-- taken once per run by every claim (measured: a fifth of a claim of ten runs).
--
-- What the key did is done by `probactr_forget_executor`, which replaces
-- `probactr_forget_executor_in_history`: deleting an executor that still owns a live run
-- is refused (only active runs carry one, and they must), and its ended runs keep no
-- executor.
ALTER TABLE runs_live DROP CONSTRAINT runs_live_executor_id_fkey;

DROP TRIGGER executors_forget_in_history ON executors;
DROP FUNCTION probactr_forget_executor_in_history();
