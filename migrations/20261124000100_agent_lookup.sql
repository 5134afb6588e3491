-- ValidateAgent in one round trip: the org setting and the read in one statement, where it
-- used to take BEGIN, set_config, SELECT and COMMIT. The function runs as its caller
-- (SECURITY INVOKER), so the row-level security policies apply to the read exactly as in an
-- org-scoped transaction; the setting is local to the statement's own transaction and is gone
-- when it ends, as with begin_tenant. The query also filters on org_id itself.
CREATE FUNCTION agent_in_org(p_org_id uuid, p_agent_id uuid)
RETURNS TABLE (
    agent_id   uuid,
    org_id     uuid,
    status     text,
    name       text,
    created_at timestamptz
)
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.set_config('svc.org_id', p_org_id::text, true);
    RETURN QUERY
        SELECT a.agent_id, a.org_id, a.status, a.name, a.created_at
        FROM public.agents AS a
        WHERE a.org_id = p_org_id AND a.agent_id = p_agent_id;
END
$$;

REVOKE ALL ON FUNCTION agent_in_org(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_in_org(uuid, uuid) TO svc_app;
