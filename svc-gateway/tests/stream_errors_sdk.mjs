// The official OpenAI Node SDK, unchanged, on streams that break midway.
//
// Run by tests/it/stream_errors_sdk.rs: `node stream_errors_sdk.mjs CONFIG.json`, where the file
// holds {prefix, base_url, token, agent_id, model}; `prefix` is where `npm install openai` put
// the SDK. For each route it records whether the SDK threw, with what class, code and request
// id, and the text it had before; the Rust side asserts. The result is one JSON object on stdout.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(join(config.prefix, "package.json"));
const sdk = require("openai");
const OpenAI = sdk.OpenAI ?? sdk.default;

const client = new OpenAI({
  baseURL: `${config.base_url}/v1`,
  apiKey: config.token,
  defaultHeaders: { "X-SVC-Agent-ID": config.agent_id },
  timeout: 30_000,
  maxRetries: 0,
});

function thrown(error, text) {
  return {
    class: error?.constructor?.name ?? null,
    code: error?.code ?? null,
    request_id: error?.error?.request_id ?? null,
    text: text.join(""),
  };
}

async function responses() {
  const text = [];
  try {
    const stream = await client.responses.create({
      model: config.model,
      input: "Say hello.",
      stream: true,
    });
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") text.push(event.delta);
    }
  } catch (error) {
    return thrown(error, text);
  }
  return { class: null, text: text.join("") };
}

async function chat() {
  const text = [];
  try {
    const stream = await client.chat.completions.create({
      model: config.model,
      messages: [{ role: "user", content: "Say hello." }],
      stream: true,
    });
    for await (const chunk of stream) {
      for (const choice of chunk.choices) text.push(choice.delta?.content ?? "");
    }
  } catch (error) {
    return thrown(error, text);
  }
  return { class: null, text: text.join("") };
}

const out = { responses: await responses(), chat: await chat() };
console.log(JSON.stringify(out));
