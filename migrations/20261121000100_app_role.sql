-- The application role every service connection runs as (SET ROLE in the pool's after-connect
-- hook). It owns nothing and cannot bypass row-level security, so tenant isolation holds even
-- when the DSN is the owner's.
--
-- Roles are cluster-wide while migrations run per database, possibly many at once on one
-- server: the existence check alone races, so a concurrent creation is caught and ignored.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'svc_app') THEN
        CREATE ROLE svc_app NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

-- SET ROLE needs membership; superusers are members of every role already.
DO $$
BEGIN
    IF NOT pg_catalog.pg_has_role(current_user, 'svc_app', 'MEMBER') THEN
        EXECUTE format('GRANT svc_app TO %I', current_user);
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

GRANT USAGE ON SCHEMA public TO svc_app;

-- Lets a service connecting as svc_app itself refuse to start on an unmigrated database.
GRANT SELECT ON _sqlx_migrations TO svc_app;
