-- The MCP tools an agent may reach, as `server/tool` or `server/*` patterns separated by one
-- space (SetAgentTools refuses a pattern holding one). Empty: no tool at all.
ALTER TABLE agents ADD COLUMN tools text NOT NULL DEFAULT '' CHECK (length(tools) <= 65536);

-- ValidateToken reads the grants with the agent, so the gateway learns them in the same call.
-- The returned row type changes, which CREATE OR REPLACE cannot do.
DROP FUNCTION agent_in_org(uuid, uuid);

CREATE FUNCTION agent_in_org(p_org_id uuid, p_agent_id uuid)
RETURNS TABLE (
    agent_id   uuid,
    org_id     uuid,
    status     text,
    name       text,
    created_at timestamptz,
    tools      text
)
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.set_config('svc.org_id', p_org_id::text, true);
    RETURN QUERY
        SELECT a.agent_id, a.org_id, a.status, a.name, a.created_at, a.tools
        FROM public.agents AS a
        WHERE a.org_id = p_org_id AND a.agent_id = p_agent_id;
END
$$;

REVOKE ALL ON FUNCTION agent_in_org(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_in_org(uuid, uuid) TO svc_app;
