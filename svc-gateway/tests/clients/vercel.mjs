// The Vercel AI SDK: `generateText` with a tool (run to its final text) and `streamText`, on
// @ai-sdk/openai (its Responses and its Chat Completions models) and @ai-sdk/anthropic.
// Resolved from the npm prefix given as `prefix`; prints one JSON object.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(`${config.prefix}/package.json`);
const load = (name) => import(require.resolve(name));
const { generateText, streamText, tool, stepCountIs } = await load("ai");
const { createOpenAI } = await load("@ai-sdk/openai");
const { createAnthropic } = await load("@ai-sdk/anthropic");
const { z } = await load("zod");

const headers = { "X-SVC-Agent-ID": config.agent_id };
const openai = createOpenAI({ baseURL: `${config.base_url}/v1`, apiKey: config.token, headers });
const anthropic = createAnthropic({
  baseURL: `${config.base_url}/v1`,
  authToken: config.token,
  headers,
});
const models = {
  openai_responses: openai(config.gpt),
  openai_chat: openai.chat(config.gpt),
  anthropic: anthropic(config.claude),
};
const calls = [];
const tools = {
  get_weather: tool({
    description: "The current weather in a city.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `Sunny in ${city}, 21 C.`;
    },
  }),
};

const out = {};
for (const [name, model] of Object.entries(models)) {
  try {
    calls.length = 0;
    const generated = await generateText({
      model,
      tools,
      stopWhen: stepCountIs(4),
      maxRetries: 0,
      prompt: "What is the weather in Oslo?",
    });
    const streamed = streamText({ model, maxRetries: 0, prompt: "Say hello." });
    let text = "";
    let pieces = 0;
    for await (const piece of streamed.textStream) {
      text += piece;
      pieces += 1;
    }
    out[name] = {
      text: generated.text,
      steps: generated.steps.length,
      tool_calls: [...calls],
      streamed: text,
      pieces,
      finish: await streamed.finishReason,
    };
  } catch (error) {
    out[name] = { error: error?.name ?? "Error", message: String(error?.message ?? error) };
  }
}
console.log(JSON.stringify(out));
