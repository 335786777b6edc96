-- Named secrets jobs reference as {{ secrets.NAME }}. Values are sealed by the
-- manager with AES-256-GCM under PROBACTR_SECRET_KEY (key_id says which key) and opened
-- only by executors, just before a run: this table never holds a value in the clear.
CREATE TABLE secrets (
    name        text PRIMARY KEY CONSTRAINT secrets_name_valid CHECK (name ~ '^[A-Za-z0-9_.-]{1,100}$'),
    key_id      text NOT NULL,
    nonce       bytea NOT NULL,
    ciphertext  bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text NOT NULL
);
