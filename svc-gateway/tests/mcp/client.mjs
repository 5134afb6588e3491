// The official MCP TypeScript SDK (npm `@modelcontextprotocol/sdk`) against svc-gateway.
//
// Run by tests/it/mcp.rs: `node client.mjs CONFIG.json`, where the file holds {prefix, url, token,
// agent_id}; `prefix` is where npm put the SDK. Lists the tools, calls a granted one and one
// that is not granted, and prints one JSON object of what the SDK made of the answers.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(join(config.prefix, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require(
  "@modelcontextprotocol/sdk/client/streamableHttp.js",
);

const transport = new StreamableHTTPClientTransport(new URL(config.url), {
  requestInit: {
    headers: {
      Authorization: `Bearer ${config.token}`,
      "X-SVC-Agent-ID": config.agent_id,
    },
  },
});
const client = new Client({ name: "svc-test-node", version: "1.0.0" });
await client.connect(transport);

const out = { session_id: transport.sessionId ?? null };
const listed = await client.listTools();
out.tools = listed.tools.map((tool) => tool.name).sort();
const echo = await client.callTool({ name: "echo", arguments: { text: "from node" } });
out.echo = echo.content.filter((c) => c.type === "text").map((c) => c.text);
try {
  await client.callTool({ name: "add", arguments: { a: 1, b: 2 } });
  out.add = "answered";
} catch (error) {
  out.add_code = error.code ?? null;
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
