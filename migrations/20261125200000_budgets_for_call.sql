-- ValidateToken answers the budgets that apply to a call, so the gateway holds the call to them
-- without asking again: the org's, the token's and the agent's. One text value, `scope target
-- limit period` per budget, comma-separated, so the token read stays one statement.
CREATE FUNCTION budgets_for_call(p_org_id uuid, p_token_id uuid, p_agent_id uuid)
RETURNS TABLE (budgets text)
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
-- One row, always (an aggregate): told to the planner, so the validation statement's estimate
-- stays that of one row and never crosses the JIT threshold (the default guess of 1000 rows
-- per function, three functions deep, did: 100 ms of JIT compilation per statement).
ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.set_config('svc.org_id', p_org_id::text, true);
    RETURN QUERY
        SELECT pg_catalog.string_agg(
                   b.scope || ' ' || b.target_id::text || ' ' || b.limit_usd_micros::text
                       || ' ' || b.period,
                   ',')
        FROM public.budgets AS b
        WHERE b.org_id = p_org_id
          AND ((b.scope = 'org' AND b.target_id = p_org_id)
               OR (b.scope = 'token' AND b.target_id = p_token_id)
               OR (b.scope = 'agent' AND b.target_id = p_agent_id));
END
$$;

REVOKE ALL ON FUNCTION budgets_for_call(uuid, uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION budgets_for_call(uuid, uuid, uuid) TO svc_app;

-- The functions the validation statement joins return one row or none.
ALTER FUNCTION token_for_validation(uuid) ROWS 1;
ALTER FUNCTION agent_in_org(uuid, uuid) ROWS 1;
