-- Row-level security: a connection sees and writes only the rows of the org named by the
-- transaction-local setting svc.org_id (set with set_config('svc.org_id', $1, true)).
--
-- NULLIF matters: once a transaction that set svc.org_id has ended, the setting reads as ''
-- on that pooled connection, and ''::uuid would raise instead of matching nothing.
-- FORCE applies the policies to the table owner too.

ALTER TABLE organizations ENABLE ROW LEVEL SECURITY;
ALTER TABLE organizations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON organizations
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

ALTER TABLE org_memberships ENABLE ROW LEVEL SECURITY;
ALTER TABLE org_memberships FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON org_memberships
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

ALTER TABLE agents ENABLE ROW LEVEL SECURITY;
ALTER TABLE agents FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agents
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

ALTER TABLE tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE tokens FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tokens
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

ALTER TABLE projects ENABLE ROW LEVEL SECURITY;
ALTER TABLE projects FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON projects
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

-- A user row has no org: it is visible to the orgs it is a member of. Creating one is allowed
-- (the membership that makes it visible is checked by its own policy); a user without any
-- membership is visible to nobody.
ALTER TABLE users ENABLE ROW LEVEL SECURITY;
ALTER TABLE users FORCE ROW LEVEL SECURITY;
CREATE POLICY member_of_current_org ON users FOR SELECT
    USING (EXISTS (
        SELECT 1 FROM org_memberships AS m
        WHERE m.user_id = users.user_id
          AND m.org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid
    ));
CREATE POLICY create_user ON users FOR INSERT WITH CHECK (true);

-- ValidateToken must read a token before it knows the org. This is the only path around the
-- policies: one row, by primary key, through a function that runs as its owner (the migrating
-- role) with a fixed search_path.
CREATE FUNCTION token_for_validation(p_token_id uuid)
RETURNS TABLE (
    token_id    uuid,
    org_id      uuid,
    user_id     uuid,
    agent_id    uuid,
    permissions bigint,
    secret_hash text,
    expires_at  timestamptz,
    revoked_at  timestamptz
)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.token_id, t.org_id, t.user_id, t.agent_id, t.permissions, t.secret_hash,
           t.expires_at, t.revoked_at
    FROM public.tokens AS t
    WHERE t.token_id = p_token_id
$$;

REVOKE ALL ON FUNCTION token_for_validation(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION token_for_validation(uuid) TO svc_app;

-- FORCE subjects the owner to the policies too, so when the owner is not a superuser the
-- function above would see nothing; let the owner (and only it) read tokens without an org.
-- The owner can switch the policies off anyway, so this grants it nothing new.
DO $$
BEGIN
    EXECUTE format(
        'CREATE POLICY owner_token_lookup ON tokens FOR SELECT TO %I USING (true)',
        current_user
    );
END
$$;
