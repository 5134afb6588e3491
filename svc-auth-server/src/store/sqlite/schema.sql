-- The embedded identity schema: the PostgreSQL tables without roles or row-level security.
-- Every statement is idempotent; the store runs this file each time it opens a database.
--
-- Ids are 16-byte BLOBs (sqlx's encoding of a uuid, whose byte order is the uuid order);
-- times are INTEGER microseconds since the Unix epoch, so they sort as numbers and keep
-- PostgreSQL's precision.

CREATE TABLE IF NOT EXISTS organizations (
    org_id     BLOB PRIMARY KEY NOT NULL CHECK (length(org_id) = 16),
    name       TEXT CHECK (length(name) <= 256),
    created_at INTEGER NOT NULL
) STRICT;

-- A user belongs to orgs through memberships; the row itself carries no org.
CREATE TABLE IF NOT EXISTS users (
    user_id      BLOB PRIMARY KEY NOT NULL CHECK (length(user_id) = 16),
    display_name TEXT CHECK (length(display_name) <= 256),
    created_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE IF NOT EXISTS org_memberships (
    org_id     BLOB NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    user_id    BLOB NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
    role       TEXT NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'admin', 'member')),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, user_id)
) STRICT;

CREATE INDEX IF NOT EXISTS org_memberships_user_id ON org_memberships (user_id);

CREATE TABLE IF NOT EXISTS agents (
    agent_id   BLOB PRIMARY KEY NOT NULL CHECK (length(agent_id) = 16),
    org_id     BLOB NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    status     TEXT NOT NULL DEFAULT 'active'
               CHECK (status IN ('active', 'paused', 'suspended', 'archived')),
    name       TEXT CHECK (length(name) <= 256),
    created_at INTEGER NOT NULL,
    -- When it was created or its status last moved, and why it last moved; added in schema
    -- version 4.
    updated_at    INTEGER NOT NULL DEFAULT 0,
    status_reason TEXT CHECK (length(status_reason) <= 256),
    -- The MCP tool grants, one space between patterns; added in schema version 5.
    tools         TEXT NOT NULL DEFAULT '' CHECK (length(tools) <= 65536),
    -- Target of the tokens' composite key: a token can only bind an agent of its own org.
    UNIQUE (org_id, agent_id)
) STRICT;

CREATE INDEX IF NOT EXISTS agents_org_created ON agents (org_id, created_at, agent_id);

CREATE TABLE IF NOT EXISTS tokens (
    token_id    BLOB PRIMARY KEY NOT NULL CHECK (length(token_id) = 16),
    org_id      BLOB NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    user_id     BLOB,
    agent_id    BLOB,
    permissions INTEGER NOT NULL DEFAULT 0,
    name        TEXT CHECK (length(name) <= 256),
    -- An Argon2id PHC string; the secret itself is never stored.
    secret_hash TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    revoked_at  INTEGER,
    -- The token that issued this one through CreateToken; added in schema version 2.
    issuer_token_id BLOB CHECK (length(issuer_token_id) = 16),
    -- The token's own rate limits; added in schema version 3.
    rpm_limit   INTEGER CHECK (rpm_limit > 0),
    tpm_limit   INTEGER CHECK (tpm_limit > 0),
    -- Composite keys: a token's user and agent must belong to the token's org.
    FOREIGN KEY (org_id, user_id) REFERENCES org_memberships (org_id, user_id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, agent_id)
) STRICT;

-- ListTokens pages by (created_at, token_id) within one org.
CREATE INDEX IF NOT EXISTS tokens_org_created ON tokens (org_id, created_at, token_id);

-- Reserved: no API path uses a project yet.
CREATE TABLE IF NOT EXISTS projects (
    project_id BLOB PRIMARY KEY NOT NULL CHECK (length(project_id) = 16),
    org_id     BLOB NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    name       TEXT CHECK (length(name) <= 256),
    created_at INTEGER NOT NULL
) STRICT;

-- The usage ledger (schema version 3): one row per call the gateway put to a provider, written
-- by the dev gateway in batches. Ids are TEXT here, so the totals group by the ids' usual form.
-- `cost_usd_micros`, what the call cost in US micro-dollars (0 without a price), came in schema
-- version 6.
CREATE TABLE IF NOT EXISTS usage_ledger (
    record_id         TEXT PRIMARY KEY NOT NULL,
    org_id            BLOB NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    token_id          TEXT NOT NULL,
    agent_id          TEXT,
    model             TEXT NOT NULL CHECK (length(model) <= 256),
    provider          TEXT NOT NULL CHECK (length(provider) <= 128),
    prompt_tokens     INTEGER NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens INTEGER NOT NULL CHECK (completion_tokens >= 0),
    status            INTEGER NOT NULL CHECK (status BETWEEN 100 AND 599),
    latency_ms        INTEGER NOT NULL CHECK (latency_ms >= 0),
    created_at        INTEGER NOT NULL,
    -- An MCP tool call's `server/tool` and outcome; NULL for a provider call. Added in schema
    -- version 5.
    tool              TEXT CHECK (length(tool) <= 200),
    outcome           TEXT CHECK (outcome IN ('ok', 'error', 'denied')),
    cost_usd_micros   INTEGER NOT NULL DEFAULT 0 CHECK (cost_usd_micros >= 0)
) STRICT;

CREATE INDEX IF NOT EXISTS usage_ledger_by_time ON usage_ledger (org_id, created_at);

-- The audit trail (schema version 4): one row per administrative act, granted or denied.
-- Append-only: the triggers refuse a change or a deletion.
CREATE TABLE IF NOT EXISTS audit_events (
    event_id       BLOB PRIMARY KEY NOT NULL CHECK (length(event_id) = 16),
    org_id         BLOB NOT NULL REFERENCES organizations (org_id),
    occurred_at    INTEGER NOT NULL,
    actor_token_id BLOB CHECK (length(actor_token_id) = 16),
    action         TEXT NOT NULL CHECK (length(action) <= 64),
    target_id      TEXT CHECK (length(target_id) <= 128),
    outcome        TEXT NOT NULL CHECK (outcome IN ('ok', 'denied')),
    detail         TEXT NOT NULL DEFAULT '{}'
) STRICT;

CREATE INDEX IF NOT EXISTS audit_events_org_time ON audit_events (org_id, occurred_at, event_id);

CREATE TRIGGER IF NOT EXISTS audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only');
END;

CREATE TRIGGER IF NOT EXISTS audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only');
END;

-- Money budgets (schema version 6): a limit in US micro-dollars per period on an org, an agent
-- or a token; an org's own budget names the org as its target.
CREATE TABLE IF NOT EXISTS budgets (
    org_id           BLOB NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    scope            TEXT NOT NULL CHECK (scope IN ('org', 'agent', 'token')),
    target_id        BLOB NOT NULL CHECK (length(target_id) = 16),
    limit_usd_micros INTEGER NOT NULL CHECK (limit_usd_micros >= 0),
    period           TEXT NOT NULL CHECK (period IN ('day', 'week', 'month', 'total')),
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (org_id, scope, target_id)
) STRICT;
