-- Sealed values bound to what they seal, and channel URLs sealed.
--
-- Values are now sealed with AES-GCM associated data naming their owner (a secret's
-- name, a channel's id and field: see common/src/secrets.rs), so a blob copied onto
-- another row no longer opens. SQL cannot re-seal without the key, so this migration
-- only marks the format of each value: rows sealed before it are `bound = false`, still
-- open as before, and the manager re-seals them bound at its start (it holds the key and
-- has just run the migrations). New values are written `bound = true`.
--
-- Webhook and Slack URLs are credentials (whoever knows a Slack incoming-webhook URL may
-- post to the channel), so they are sealed like secrets in the `url_*` columns and
-- `config.url` keeps only a masked form (`https://hooks.slack.com/***`). Channels of
-- earlier releases keep their URL in the clear in `config` until the manager's start
-- seals it; monitors send to either.

ALTER TABLE secrets ADD COLUMN bound BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE alert_channels
    ADD COLUMN secret_bound BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN url_key_id TEXT,
    ADD COLUMN url_nonce BYTEA,
    ADD COLUMN url_sealed BYTEA,
    ADD COLUMN url_bound BOOLEAN NOT NULL DEFAULT FALSE,
    ADD CONSTRAINT alert_channels_url_whole CHECK (
        (url_key_id IS NULL) = (url_nonce IS NULL) AND (url_nonce IS NULL) = (url_sealed IS NULL));
