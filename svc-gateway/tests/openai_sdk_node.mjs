// The official OpenAI Node SDK against svc-gateway, unchanged.
//
// Run by tests/it/openai_sdk_node.rs: `node openai_sdk_node.mjs CONFIG.json`, where the file holds
// {prefix, base_url, token, agent_id, model}; `prefix` is where `npm install openai` put the
// SDK. Each check records what the SDK made of the answers; the Rust side asserts. The result
// is one JSON object on stdout.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(join(config.prefix, "package.json"));
const sdk = require("openai");
const OpenAI = sdk.OpenAI ?? sdk.default;

// Bounds every call, so a wedged request fails the run instead of hanging it.
const TIMEOUT_MS = 30_000;

const client = new OpenAI({
  baseURL: config.base_url,
  apiKey: config.token,
  defaultHeaders: { "X-SVC-Agent-ID": config.agent_id },
  timeout: TIMEOUT_MS,
  maxRetries: 0,
});

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The current weather in a city.",
      parameters: {
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
      },
    },
  },
];

async function toolRoundTrip() {
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  const first = await client.chat.completions.create({
    model: config.model,
    messages,
    tools,
    tool_choice: "required",
  });
  const message = first.choices[0].message;
  const call = message.tool_calls[0];
  messages.push(message);
  messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify({ temperature_c: 21 }) });
  const second = await client.chat.completions.create({ model: config.model, messages, tools });
  return {
    first_finish: first.choices[0].finish_reason,
    first_content: message.content,
    call_type: call.type,
    call_name: call.function.name,
    call_arguments: JSON.parse(call.function.arguments),
    second_finish: second.choices[0].finish_reason,
    second_content: second.choices[0].message.content,
    total_tokens: second.usage.total_tokens,
  };
}

async function stream() {
  const chunks = await client.chat.completions.create({
    model: config.model,
    messages: [{ role: "user", content: "Say hello." }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  const finishes = [];
  const usage = [];
  const objects = new Set();
  let count = 0;
  for await (const chunk of chunks) {
    count += 1;
    objects.add(chunk.object);
    for (const choice of chunk.choices) {
      text += choice.delta?.content ?? "";
      if (choice.finish_reason) finishes.push(choice.finish_reason);
    }
    if (chunk.usage) usage.push(chunk.usage);
  }
  return { chunks: count, objects: [...objects], text, finish_reasons: finishes, usage };
}

async function guarded(check) {
  try {
    return await check();
  } catch (error) {
    return { unexpected: String(error?.stack ?? error) };
  }
}

const results = {
  node_version: process.version,
  tools: await guarded(toolRoundTrip),
  stream: await guarded(stream),
};
process.stdout.write(JSON.stringify(results));
