-- Who manages a job's definition: NULL when people edit it in the admin or through the
-- API; a name (`probactr apply`) when definition files do. `apply --prune` deletes only
-- jobs its files manage and no longer name; applying a file that names a job adopts it.
ALTER TABLE jobs ADD COLUMN managed_by TEXT
    CONSTRAINT jobs_managed_by_length CHECK (managed_by IS NULL OR char_length(managed_by) BETWEEN 1 AND 100);
