-- A token's own rate limits, applied by the gateway beside its org's: requests per minute and
-- tokens per minute. NULL means only the org's limit applies. CreateToken never lets a token
-- exceed the limits of the token that issues it.

ALTER TABLE tokens ADD COLUMN rpm_limit bigint CHECK (rpm_limit > 0 AND rpm_limit <= 4294967295);
ALTER TABLE tokens ADD COLUMN tpm_limit bigint CHECK (tpm_limit > 0);

GRANT SELECT (rpm_limit, tpm_limit) ON tokens TO svc_app;

-- ValidateToken returns the limits, so the one lookup before the org is known returns them too.
-- A function's result type cannot change in place: drop and create it again, with its grants.
DROP FUNCTION token_for_validation(uuid);

CREATE FUNCTION token_for_validation(p_token_id uuid)
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
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.token_id, t.org_id, t.user_id, t.agent_id, t.permissions, t.secret_hash,
           t.expires_at, t.revoked_at, t.rpm_limit, t.tpm_limit
    FROM public.tokens AS t
    WHERE t.token_id = p_token_id
$$;

REVOKE ALL ON FUNCTION token_for_validation(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION token_for_validation(uuid) TO svc_app;
