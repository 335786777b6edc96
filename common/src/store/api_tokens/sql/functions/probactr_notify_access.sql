-- probactr_notify_access: current body.
--
-- Tells managers that who may do what changed, so that they forget the bearer tokens
-- they verified recently (a revoked token, a disabled user, a role taken away must not
-- keep working from a manager's memory). One notification per statement, and only on
-- the columns access is read from: a token's last-use time and a namespace's running
-- count change all the time and tell nothing.
CREATE OR REPLACE FUNCTION probactr_notify_access() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('probactr_access', '');
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER api_tokens_access_changed
    AFTER UPDATE OF user_id, token_hash, expires_at, revoked_at, namespaces, role OR DELETE OR TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_access();

CREATE OR REPLACE TRIGGER users_access_changed
    AFTER UPDATE OF username, disabled, cluster_admin OR DELETE OR TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_access();

CREATE OR REPLACE TRIGGER user_roles_access_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON user_roles
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_access();

CREATE OR REPLACE TRIGGER namespaces_access_changed
    AFTER INSERT OR UPDATE OF name OR DELETE OR TRUNCATE ON namespaces
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_access();
