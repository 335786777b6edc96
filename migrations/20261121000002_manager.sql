-- probactr manager schema: users, sessions, API tokens, login attempts, audit log.
--
-- Secrets are never stored: passwords as argon2id PHC strings, session ids and API
-- tokens as the hex SHA-256 of the random value the client holds (they are 256-bit
-- random values, so a fast hash is enough; a database leak yields nothing replayable).
--
-- Deletion policy: deleting a user deletes their sessions and tokens; the audit log keeps
-- the user's name as it was (actor) and loses only the link (actor_id SET NULL).

CREATE TABLE users (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username            TEXT NOT NULL,
    password_hash       TEXT NOT NULL,
    -- admin: everything; operator: pause, resume, run now, cancel, triggers, noop/sleep
    -- jobs; viewer: read only. Only admins create or edit shell and http jobs.
    role                TEXT NOT NULL,
    disabled            BOOLEAN NOT NULL DEFAULT FALSE,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    password_changed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT users_username_unique UNIQUE (username),
    CONSTRAINT users_username_length CHECK (char_length(username) BETWEEN 1 AND 100),
    CONSTRAINT users_role_valid CHECK (role IN ('admin', 'operator', 'viewer'))
);

CREATE TABLE sessions (
    -- SHA-256 (hex) of the cookie value.
    id_hash         TEXT PRIMARY KEY,
    user_id         BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- Sent back in every state-changing form (and the X-CSRF-Token header of
    -- cookie-authenticated API calls).
    csrf_token      TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Absolute timeout; the idle timeout is judged on last_seen_at.
    expires_at      TIMESTAMPTZ NOT NULL
);

CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_expires ON sessions (expires_at);

CREATE TABLE api_tokens (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id         BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name            TEXT NOT NULL DEFAULT '',
    -- SHA-256 (hex) of the bearer token.
    token_hash      TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at    TIMESTAMPTZ,
    expires_at      TIMESTAMPTZ,
    revoked_at      TIMESTAMPTZ,
    CONSTRAINT api_tokens_hash_unique UNIQUE (token_hash)
);

CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- Failed logins, for the per user-and-address rate limit (shared by every manager
-- replica). Rows older than the limit's window are deleted as new failures arrive.
CREATE TABLE login_failures (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username        TEXT NOT NULL,
    address         TEXT NOT NULL,
    at              TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX login_failures_key ON login_failures (username, address, at);

CREATE TABLE audit_log (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor_id        BIGINT REFERENCES users (id) ON DELETE SET NULL,
    -- The actor's username when the change was made.
    actor           TEXT NOT NULL,
    -- What was done, as object.verb: job.create, job.update, trigger.pause, run.cancel…
    action          TEXT NOT NULL,
    object_type     TEXT NOT NULL,
    object_id       BIGINT,
    before          JSONB,
    after           JSONB
);

CREATE INDEX audit_log_newest ON audit_log (id DESC);
CREATE INDEX audit_log_object ON audit_log (object_type, object_id, id DESC);
