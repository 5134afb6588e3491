-- The gateway's own role: it records sessions and their checkpoints, and nothing else. The
-- gateway's pool runs as it (SET ROLE in the after-connect hook), so a compromised gateway
-- cannot read or write tokens, revoke them, or call token_for_validation: those stay with
-- svc_app, the auth server's role. Like svc_app it owns nothing and cannot bypass row-level
-- security.
--
-- Roles are cluster-wide while migrations run per database, possibly many at once on one
-- server: the existence check alone races, so a concurrent creation is caught and ignored.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'svc_gateway') THEN
        CREATE ROLE svc_gateway NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

-- SET ROLE needs membership; superusers are members of every role already.
DO $$
BEGIN
    IF NOT pg_catalog.pg_has_role(current_user, 'svc_gateway', 'MEMBER') THEN
        EXECUTE format('GRANT svc_gateway TO %I', current_user);
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

GRANT USAGE ON SCHEMA public TO svc_gateway;

-- Exactly what SessionStore::record does: insert a session or bump its last use, and insert
-- one checkpoint. The policies of the session tables apply to it as to every role.
GRANT SELECT, INSERT ON sessions, session_checkpoints TO svc_gateway;
GRANT UPDATE (last_seen_at) ON sessions TO svc_gateway;
