-- MCP tool calls in the usage ledger: a row with `tool` set is one call of `server/tool`
-- (its `provider` the server, its `model` empty, no tokens) and how it ended. Never its
-- arguments or its result. NULL for a provider call, as every row before this migration.
ALTER TABLE usage_ledger
    ADD COLUMN tool text CHECK (char_length(tool) <= 200),
    ADD COLUMN outcome text CHECK (outcome IN ('ok', 'error', 'denied')),
    ADD CONSTRAINT usage_ledger_tool_outcome CHECK ((tool IS NULL) = (outcome IS NULL));
