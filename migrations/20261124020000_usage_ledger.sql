-- The usage ledger: one row per call the gateway put to a provider (replays excluded), for
-- chargeback by token, agent, model or day. Metadata only: no message content, ever.
--
-- The gateway writes it in batches as its own role, svc_gateway, which may insert and nothing
-- else (not even read back); the auth server reads it as svc_app for GetUsage. Row-level
-- security as on every tenant table.

CREATE TABLE usage_ledger (
    -- Minted by the gateway (UUID v7) before the first attempt: a batch retried after a lost
    -- commit acknowledgement inserts nothing twice.
    record_id         uuid PRIMARY KEY,
    org_id            uuid NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    token_id          uuid NOT NULL,
    agent_id          uuid,
    model             text NOT NULL CHECK (char_length(model) <= 256),
    -- The provider that answered, as the registry names it; empty when none did.
    provider          text NOT NULL CHECK (char_length(provider) <= 128),
    prompt_tokens     bigint NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens bigint NOT NULL CHECK (completion_tokens >= 0),
    status            integer NOT NULL CHECK (status BETWEEN 100 AND 599),
    latency_ms        integer NOT NULL CHECK (latency_ms >= 0),
    -- When the call was made (the gateway's clock), not when the row was written.
    created_at        timestamptz NOT NULL
);

-- GetUsage reads one org over a time range.
CREATE INDEX usage_ledger_by_time ON usage_ledger (org_id, created_at);

ALTER TABLE usage_ledger ENABLE ROW LEVEL SECURITY;
ALTER TABLE usage_ledger FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON usage_ledger
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

GRANT INSERT ON usage_ledger TO svc_gateway;
GRANT SELECT ON usage_ledger TO svc_app;
