-- Money budgets: a limit in US micro-dollars per period on an org, one of its agents or one of
-- its tokens. At most one budget per target; setting it again replaces it. An org's own budget
-- names the org as its target, so every budget has one key.

CREATE TABLE budgets (
    org_id           uuid NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    scope            text NOT NULL CHECK (scope IN ('org', 'agent', 'token')),
    -- The org itself, the agent or the token.
    target_id        uuid NOT NULL,
    limit_usd_micros bigint NOT NULL CHECK (limit_usd_micros >= 0),
    -- day, week (from Monday), month (calendar) in UTC, or total (never resets).
    period           text NOT NULL CHECK (period IN ('day', 'week', 'month', 'total')),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, scope, target_id),
    CHECK (scope <> 'org' OR target_id = org_id)
);

ALTER TABLE budgets ENABLE ROW LEVEL SECURITY;
ALTER TABLE budgets FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON budgets
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

GRANT SELECT, INSERT, UPDATE, DELETE ON budgets TO svc_app;

-- A budget's spend is the ledger's sum over its period, by agent or by token.
CREATE INDEX usage_ledger_by_agent ON usage_ledger (org_id, agent_id, created_at);
CREATE INDEX usage_ledger_by_token ON usage_ledger (org_id, token_id, created_at);
