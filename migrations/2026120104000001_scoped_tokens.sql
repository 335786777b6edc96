-- API tokens scoped to namespaces and capped at a role. A token acts in the namespaces it
-- names (NULL: every namespace its user may see) with at most its role (NULL: its user's
-- role there); its user's role is read at each request, so lowering a user's role lowers
-- their tokens too. A token with either set is scoped, and never a cluster admin.
ALTER TABLE api_tokens ADD COLUMN namespaces TEXT[];
ALTER TABLE api_tokens ADD COLUMN role TEXT;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_valid
    CHECK (role IS NULL OR role IN ('viewer', 'operator', 'admin'));
