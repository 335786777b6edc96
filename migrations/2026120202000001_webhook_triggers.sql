-- Webhook triggers: a trigger of kind `webhook` has no schedule (no instant, so the fire
-- claim, the ledger and the reconciler never see one); a POST to its secret URL starts a
-- run. What is particular to webhooks lives in `trigger_webhooks`, one row per such
-- trigger, and every delivery received is recorded in `webhook_deliveries`.

ALTER TABLE triggers DROP CONSTRAINT triggers_kind_valid;
ALTER TABLE triggers ADD CONSTRAINT triggers_kind_valid
    CHECK (kind IN ('cron', 'interval', 'once', 'webhook'));
ALTER TABLE triggers DROP CONSTRAINT triggers_kind_fields;
ALTER TABLE triggers ADD CONSTRAINT triggers_kind_fields CHECK (
    (kind = 'cron' AND cron IS NOT NULL AND interval_secs IS NULL AND at IS NULL)
    OR (kind = 'interval' AND interval_secs IS NOT NULL AND cron IS NULL AND at IS NULL)
    OR (kind = 'once' AND at IS NOT NULL AND cron IS NULL AND interval_secs IS NULL)
    OR (kind = 'webhook' AND cron IS NULL AND interval_secs IS NULL AND at IS NULL)
);
-- The fire claim selects by `next_fire_at`: a webhook trigger never has one.
ALTER TABLE triggers ADD CONSTRAINT triggers_webhook_unscheduled
    CHECK (kind <> 'webhook' OR next_fire_at IS NULL);

CREATE TABLE trigger_webhooks (
    trigger_id          BIGINT PRIMARY KEY REFERENCES triggers (id) ON DELETE CASCADE,
    -- SHA-256 (hex) of the URL's token; the token itself is shown once and never stored.
    token_digest        TEXT NOT NULL,
    -- Signature checking (all NULL: none): the header carrying it, an optional prefix
    -- before the hex MAC (`sha256=`), the algorithm, and the secret sealed like job
    -- secrets (write-only).
    signature_header    TEXT,
    signature_prefix    TEXT NOT NULL DEFAULT '',
    signature_algorithm TEXT,
    secret_key_id       TEXT,
    secret_nonce        BYTEA,
    secret_sealed       BYTEA,
    -- Run parameter name -> path into the JSON body (`$.head_commit.id`, `$.a[0]`).
    params_from         JSONB NOT NULL DEFAULT '{}',
    -- The header naming a delivery (`X-GitHub-Delivery`): a repeat within 24 h starts nothing.
    dedup_header        TEXT,
    -- Deliveries accepted per minute; more are refused with 429.
    rate_per_minute     INTEGER NOT NULL DEFAULT 60,
    token_rotated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT trigger_webhooks_token_unique UNIQUE (token_digest),
    CONSTRAINT trigger_webhooks_algorithm_valid CHECK (signature_algorithm IN ('hmac-sha256')),
    CONSTRAINT trigger_webhooks_signature_whole CHECK (
        (signature_header IS NULL) = (signature_algorithm IS NULL)
        AND (signature_header IS NULL) = (secret_sealed IS NULL)
        AND (secret_key_id IS NULL) = (secret_nonce IS NULL)
        AND (secret_nonce IS NULL) = (secret_sealed IS NULL)),
    CONSTRAINT trigger_webhooks_params_from_object CHECK (jsonb_typeof(params_from) = 'object'),
    CONSTRAINT trigger_webhooks_rate_positive CHECK (rate_per_minute BETWEEN 1 AND 100000)
);

CREATE TABLE webhook_deliveries (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger_id      BIGINT NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    received_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The value of the trigger's `dedup_header`, when it has one and the request carried it.
    delivery_id     TEXT,
    -- accepted (a run started), duplicate (a repeat of an accepted delivery), refused.
    outcome         TEXT NOT NULL,
    -- The HTTP status answered.
    status          INTEGER NOT NULL,
    -- Why it was refused.
    reason          TEXT,
    -- The run it started (or, for a duplicate, the first delivery's run). Runs are pruned
    -- on their own schedule, so no foreign key.
    run_id          BIGINT,
    CONSTRAINT webhook_deliveries_outcome_valid CHECK (outcome IN ('accepted', 'duplicate', 'refused'))
);

-- The delivery list, the rate window and the 24 h repeat lookup, all per trigger by time.
CREATE INDEX webhook_deliveries_trigger ON webhook_deliveries (trigger_id, received_at DESC);
-- Housekeeping prunes by age.
CREATE INDEX webhook_deliveries_received ON webhook_deliveries (received_at);
