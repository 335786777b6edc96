-- Namespaces: one cluster shared by teams. Every job (with its triggers and runs),
-- workflow, secret, alert channel and alert rule belongs to exactly one namespace, and
-- names are unique within it. What existed before namespaces goes to `default`.
CREATE TABLE namespaces (
    name        TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    -- At most this many of the namespace's runs claimed or running at once (NULL: no quota).
    max_running INTEGER,
    -- At most this many jobs (retired ones not counted; NULL: no quota).
    max_jobs    INTEGER,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT namespaces_name_valid CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    CONSTRAINT namespaces_description_length CHECK (char_length(description) <= 1000),
    CONSTRAINT namespaces_max_running_positive CHECK (max_running IS NULL OR max_running >= 1),
    CONSTRAINT namespaces_max_jobs_nonnegative CHECK (max_jobs IS NULL OR max_jobs >= 0)
);
INSERT INTO namespaces (name, description)
VALUES ('default', 'Objects made without a namespace, and those made before namespaces existed.');

-- The owned objects. A namespace's name never changes, so the references need no cascade;
-- a namespace still holding objects cannot be deleted.
ALTER TABLE jobs ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default' REFERENCES namespaces (name);
ALTER TABLE jobs DROP CONSTRAINT jobs_name_unique;
ALTER TABLE jobs ADD CONSTRAINT jobs_name_unique UNIQUE (namespace, name);

ALTER TABLE workflows ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default' REFERENCES namespaces (name);
ALTER TABLE workflows DROP CONSTRAINT workflows_name_unique;
ALTER TABLE workflows ADD CONSTRAINT workflows_name_unique UNIQUE (namespace, name);

ALTER TABLE secrets ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default' REFERENCES namespaces (name);
ALTER TABLE secrets DROP CONSTRAINT secrets_pkey;
ALTER TABLE secrets ADD CONSTRAINT secrets_pkey PRIMARY KEY (namespace, name);

ALTER TABLE alert_channels ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default' REFERENCES namespaces (name);
ALTER TABLE alert_channels DROP CONSTRAINT alert_channels_name_unique;
ALTER TABLE alert_channels ADD CONSTRAINT alert_channels_name_unique UNIQUE (namespace, name);

ALTER TABLE alert_rules ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default' REFERENCES namespaces (name);
ALTER TABLE alert_rules DROP CONSTRAINT alert_rules_name_unique;
ALTER TABLE alert_rules ADD CONSTRAINT alert_rules_name_unique UNIQUE (namespace, name);

-- Roles per namespace. A cluster admin manages users, namespaces, executors and the
-- cluster's settings, and acts as an admin in every namespace.
ALTER TABLE users ADD COLUMN cluster_admin BOOLEAN NOT NULL DEFAULT false;
CREATE TABLE user_roles (
    user_id   BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    namespace TEXT NOT NULL REFERENCES namespaces (name) ON DELETE CASCADE,
    role      TEXT NOT NULL,
    PRIMARY KEY (user_id, namespace),
    CONSTRAINT user_roles_role_valid CHECK (role IN ('viewer', 'operator', 'admin'))
);
CREATE INDEX user_roles_namespace ON user_roles (namespace);
-- Today's admins become cluster admins and admins of `default`; the others keep their
-- role in `default`.
UPDATE users SET cluster_admin = (role = 'admin');
INSERT INTO user_roles (user_id, namespace, role) SELECT id, 'default', role FROM users;

-- Audit entries carry the namespace of the object they name (NULL: cluster-wide objects
-- such as users, namespaces and executors).
ALTER TABLE audit_log ADD COLUMN namespace TEXT;
UPDATE audit_log SET namespace = 'default'
WHERE object_type IN ('job', 'trigger', 'run', 'workflow', 'workflow_run', 'workflow_trigger',
                      'secret', 'alert_channel', 'alert_rule');
CREATE INDEX audit_log_namespace ON audit_log (namespace, id);
