-- Running an org for real: names for orgs and agents, an agent's status history in brief, and
-- an append-only audit trail of every administrative act.

-- Names the API accepts are at most 128 characters; the older columns allow 256, which the API
-- never writes, so the checks stay as they are.

-- When an agent last changed, and why its status last moved (at most 256 characters).
ALTER TABLE agents
    ADD COLUMN updated_at    timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN status_reason text CHECK (char_length(status_reason) <= 256);

-- ListAgents pages by (created_at, agent_id) within one org.
CREATE INDEX agents_org_created ON agents (org_id, created_at, agent_id);

-- One row per administrative act, granted or denied. `detail` holds facts of the act (never a
-- secret) as a JSON object of strings.
CREATE TABLE audit_events (
    event_id       uuid PRIMARY KEY,
    org_id         uuid NOT NULL REFERENCES organizations (org_id),
    occurred_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor_token_id uuid,
    action         text NOT NULL CHECK (char_length(action) <= 64),
    target_id      text CHECK (char_length(target_id) <= 128),
    outcome        text NOT NULL CHECK (outcome IN ('ok', 'denied')),
    detail         jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(detail) = 'object')
);

-- ListAuditEvents pages newest first by (occurred_at, event_id) within one org.
CREATE INDEX audit_events_org_time ON audit_events (org_id, occurred_at DESC, event_id DESC);

ALTER TABLE audit_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_events FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_events
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

-- Append-only: the application role may add and read events, nothing else; the gateway's role
-- gets nothing at all. The trigger refuses a change even to a role that was granted one by
-- hand, so an event stays as written unless the owner drops the trigger first.
GRANT SELECT, INSERT ON audit_events TO svc_app;

CREATE FUNCTION audit_events_append_only() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only' USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER audit_events_no_update_or_delete
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
