-- The identity store: organizations, their users, agents and PATs.
-- Every tenant table carries org_id; row-level security is switched on in the next migration.

CREATE TABLE organizations (
    org_id     uuid PRIMARY KEY,
    name       text CHECK (char_length(name) <= 256),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A user belongs to orgs through memberships; the row itself carries no org.
CREATE TABLE users (
    user_id      uuid PRIMARY KEY,
    display_name text CHECK (char_length(display_name) <= 256),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE org_memberships (
    org_id     uuid NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    user_id    uuid NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
    role       text NOT NULL DEFAULT 'member' CHECK (role IN ('owner', 'admin', 'member')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
);

CREATE INDEX org_memberships_user_id ON org_memberships (user_id);

CREATE TABLE agents (
    agent_id   uuid PRIMARY KEY,
    org_id     uuid NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    status     text NOT NULL DEFAULT 'active'
               CHECK (status IN ('active', 'paused', 'suspended', 'archived')),
    name       text CHECK (char_length(name) <= 256),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Target of the tokens' composite key: a token can only bind an agent of its own org.
    UNIQUE (org_id, agent_id)
);

CREATE TABLE tokens (
    token_id    uuid PRIMARY KEY,
    org_id      uuid NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    user_id     uuid,
    agent_id    uuid,
    permissions bigint NOT NULL DEFAULT 0,
    name        text CHECK (char_length(name) <= 256),
    -- An Argon2id PHC string; the secret itself is never stored.
    secret_hash text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    revoked_at  timestamptz,
    -- Composite keys: a token's user and agent must belong to the token's org.
    FOREIGN KEY (org_id, user_id) REFERENCES org_memberships (org_id, user_id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, agent_id)
);

-- ListTokens pages by (created_at, token_id) within one org.
CREATE INDEX tokens_org_created ON tokens (org_id, created_at, token_id);

-- Reserved: no API path uses a project yet.
CREATE TABLE projects (
    project_id uuid PRIMARY KEY,
    org_id     uuid NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    name       text CHECK (char_length(name) <= 256),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Least privilege for the application role. Nothing is deleted through the API, and the
-- token hash is readable only through token_for_validation (next migration).
GRANT SELECT, INSERT, UPDATE ON organizations, agents TO svc_app;
GRANT SELECT, INSERT ON users, org_memberships, projects TO svc_app;
GRANT INSERT ON tokens TO svc_app;
GRANT SELECT (token_id, org_id, user_id, agent_id, permissions, name, created_at, expires_at,
              revoked_at)
    ON tokens TO svc_app;
GRANT UPDATE (revoked_at) ON tokens TO svc_app;
