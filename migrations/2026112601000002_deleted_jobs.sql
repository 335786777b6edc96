-- Deleting a job keeps its history unless asked to erase it: the job is retired rather
-- than removed. A retired job has `deleted_at` set, is paused, has no triggers and no
-- live runs, and carries a name that frees the old one for a new job
-- ("nightly (deleted #12)"); its runs stay readable under that name until retention
-- drops them. Erasing the history deletes the row, and the runs with it.
ALTER TABLE jobs ADD COLUMN deleted_at TIMESTAMPTZ;
