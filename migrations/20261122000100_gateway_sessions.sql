-- The gateway's sticky sessions and one metadata checkpoint per completed chat call.
-- Metadata only: no message content is ever stored. Tenant tables like the identity ones:
-- org_id on every row, RLS forced, the application role limited to what the gateway does.

CREATE TABLE sessions (
    org_id       uuid NOT NULL REFERENCES organizations (org_id) ON DELETE CASCADE,
    -- The client's X-SVC-Session-ID, or the UUID v7 the gateway minted.
    session_id   text NOT NULL CHECK (session_id ~ '^[A-Za-z0-9._:-]{1,64}$'),
    -- The agent of the call that opened the session.
    agent_id     uuid,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, session_id)
);

CREATE TABLE session_checkpoints (
    checkpoint_id     uuid PRIMARY KEY,
    org_id            uuid NOT NULL,
    session_id        text NOT NULL,
    request_id        uuid NOT NULL,
    model             text NOT NULL CHECK (char_length(model) <= 256),
    message_count     integer NOT NULL CHECK (message_count >= 0),
    status            integer NOT NULL CHECK (status BETWEEN 100 AND 599),
    latency_ms        integer NOT NULL CHECK (latency_ms >= 0),
    stream            boolean NOT NULL,
    prompt_tokens     bigint,
    completion_tokens bigint,
    total_tokens      bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (org_id, session_id) REFERENCES sessions (org_id, session_id) ON DELETE CASCADE
);

CREATE INDEX session_checkpoints_by_session
    ON session_checkpoints (org_id, session_id, created_at);

GRANT SELECT, INSERT ON sessions, session_checkpoints TO svc_app;
GRANT UPDATE (last_seen_at) ON sessions TO svc_app;

ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON sessions
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);

ALTER TABLE session_checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE session_checkpoints FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON session_checkpoints
    USING (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('svc.org_id', true), '')::uuid);
