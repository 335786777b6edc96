-- Where an API token came from, which decides what ends it: a `login` token (made by
-- POST /api/v1/auth/token from a user name and password) ends with every password
-- change; a `personal` token (made under /api/v1/tokens by a signed-in user) ends when
-- an admin resets the password. Disabling a user ends both for good. Tokens made before
-- this migration are personal.
ALTER TABLE api_tokens
    ADD COLUMN origin text NOT NULL DEFAULT 'personal'
        CONSTRAINT api_tokens_origin_valid CHECK (origin IN ('login', 'personal'));
