-- Single sign-on. A user who logs in through the OpenID Connect provider is found again
-- by the provider's issuer and the subject it gives them (`sub`, stable, unlike names
-- and mail addresses); both or neither are set. Such a user is created with a password
-- hash of a random secret nobody keeps: they have no usable password.
ALTER TABLE users
    ADD COLUMN oidc_issuer  TEXT,
    ADD COLUMN oidc_subject TEXT,
    ADD CONSTRAINT users_oidc_identity_unique UNIQUE (oidc_issuer, oidc_subject),
    ADD CONSTRAINT users_oidc_identity_whole CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));

-- Logins under way at the provider: what the callback checks (`state`), proves (the
-- PKCE verifier) and expects in the ID token (`nonce`), found by the digest of a random
-- value in the browser's short-lived cookie, so a callback only completes in the browser
-- that started it. Each row is used once (deleted when the callback reads it); rows past
-- their ten minutes are deleted when new logins start.
CREATE TABLE oidc_logins (
    binding_hash  TEXT PRIMARY KEY,
    state         TEXT NOT NULL,
    nonce         TEXT NOT NULL,
    pkce_verifier TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX oidc_logins_created_at ON oidc_logins (created_at);
