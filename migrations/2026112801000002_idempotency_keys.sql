-- Idempotency keys: a client that sends `Idempotency-Key` with a POST gets, for the same
-- key and the same request within 24 hours, the first answer again instead of a second
-- effect (a second run, a second job). Keys are scoped to the credential that sent them
-- (`owner`: the digest of the bearer token or session), so two clients never share one.
--
-- A row is claimed before the request runs (`status` NULL: in progress) and completed
-- with the answer after; a request that failed in a way worth retrying (5xx, busy) gives
-- its key back. The monitor's housekeeping deletes rows older than 24 hours.
CREATE TABLE idempotency_keys (
    owner        TEXT NOT NULL,
    key          TEXT NOT NULL CONSTRAINT idempotency_keys_key_length CHECK (length(key) BETWEEN 1 AND 255),
    -- SHA-256 of the method, path, query and body: the same key with another request is refused.
    fingerprint  TEXT NOT NULL,
    status       INTEGER,
    content_type TEXT,
    body         BYTEA,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, key)
);

-- Housekeeping deletes the oldest first.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
