-- The validation statement costs PostgreSQL about 320,000 instructions at one token a time
-- (callgrind on the backend, `pgbench -M prepared`), most of it not in the two index probes:
-- each function scan builds its result's row type from the function's OUT columns on every
-- execution, every function with a SET clause saves and restores the whole GUC state around
-- its call, a PERFORM runs its expression through the executor, and the budgets' function
-- scan is initialised even when the token's org has no budget and it never runs. This
-- migration keeps what each function reads, under which role and policies, and changes how it
-- is called: about 263,000 instructions a statement.
--
-- * The functions return named row types, whose descriptors PostgreSQL caches.
-- * agent_in_org and budgets_for_call run as their caller, under row-level security: they
--   drop the SET clause (every name in them is schema-qualified, and running as the caller
--   they can do nothing the caller cannot) and set svc.org_id by assignment.
-- * budgets_for_call returns its one text value, for the statement to call in its select
--   list only when the token's org has a budget.
-- * token_for_validation stays SECURITY DEFINER with its fixed search_path: it is the one
--   path around the policies.

CREATE TYPE validation_token AS (
    token_id    uuid,
    org_id      uuid,
    user_id     uuid,
    agent_id    uuid,
    permissions bigint,
    secret_hash text,
    expires_at  timestamptz,
    revoked_at  timestamptz,
    rpm_limit   bigint,
    tpm_limit   bigint,
    -- Whether the token's org has any budget (its own, an agent's or a token's).
    budgeted    boolean
);

CREATE TYPE validation_agent AS (
    agent_id   uuid,
    org_id     uuid,
    status     text,
    name       text,
    created_at timestamptz,
    tools      text
);

-- A function's result type cannot change in place: drop and create again, with the grants.
DROP FUNCTION token_for_validation(uuid);

CREATE FUNCTION token_for_validation(p_token_id uuid)
RETURNS SETOF validation_token
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
        SELECT t.token_id, t.org_id, t.user_id, t.agent_id, t.permissions, t.secret_hash,
               t.expires_at, t.revoked_at, t.rpm_limit, t.tpm_limit,
               EXISTS (SELECT 1 FROM public.budgets AS b WHERE b.org_id = t.org_id)
        FROM public.tokens AS t
        WHERE t.token_id = p_token_id;
END
$$;

REVOKE ALL ON FUNCTION token_for_validation(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION token_for_validation(uuid) TO svc_app;

DROP FUNCTION agent_in_org(uuid, uuid);

CREATE FUNCTION agent_in_org(p_org_id uuid, p_agent_id uuid)
RETURNS SETOF validation_agent
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
ROWS 1
AS $$
DECLARE
    _ text;
BEGIN
    _ := pg_catalog.set_config('svc.org_id', p_org_id::text, true);
    RETURN QUERY
        SELECT a.agent_id, a.org_id, a.status, a.name, a.created_at, a.tools
        FROM public.agents AS a
        WHERE a.org_id = p_org_id AND a.agent_id = p_agent_id;
END
$$;

REVOKE ALL ON FUNCTION agent_in_org(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_in_org(uuid, uuid) TO svc_app;

DROP FUNCTION budgets_for_call(uuid, uuid, uuid);

-- The budgets of a call, `scope target limit period` each, comma-separated; NULL for none.
CREATE FUNCTION budgets_for_call(p_org_id uuid, p_token_id uuid, p_agent_id uuid)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
AS $$
DECLARE
    _ text;
    listed text;
BEGIN
    _ := pg_catalog.set_config('svc.org_id', p_org_id::text, true);
    SELECT pg_catalog.string_agg(
               b.scope || ' ' || b.target_id::text || ' ' || b.limit_usd_micros::text
                   || ' ' || b.period,
               ',')
    INTO listed
    FROM public.budgets AS b
    WHERE b.org_id = p_org_id
      AND ((b.scope = 'org' AND b.target_id = p_org_id)
           OR (b.scope = 'token' AND b.target_id = p_token_id)
           OR (b.scope = 'agent' AND b.target_id = p_agent_id));
    RETURN listed;
END
$$;

REVOKE ALL ON FUNCTION budgets_for_call(uuid, uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION budgets_for_call(uuid, uuid, uuid) TO svc_app;
