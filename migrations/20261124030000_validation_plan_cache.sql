-- token_for_validation runs on every ValidateToken. As a LANGUAGE sql function that cannot be
-- inlined (SECURITY DEFINER, its own search_path), PostgreSQL 15 parses and plans its query on
-- every call; as PL/pgSQL the plan is prepared once per connection and reused. Same signature,
-- same rows, same privileges: only the language changes.
CREATE OR REPLACE FUNCTION token_for_validation(p_token_id uuid)
RETURNS TABLE (
    token_id    uuid,
    org_id      uuid,
    user_id     uuid,
    agent_id    uuid,
    permissions bigint,
    secret_hash text,
    expires_at  timestamptz,
    revoked_at  timestamptz,
    rpm_limit   bigint,
    tpm_limit   bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
        SELECT t.token_id, t.org_id, t.user_id, t.agent_id, t.permissions, t.secret_hash,
               t.expires_at, t.revoked_at, t.rpm_limit, t.tpm_limit
        FROM public.tokens AS t
        WHERE t.token_id = p_token_id;
END
$$;
