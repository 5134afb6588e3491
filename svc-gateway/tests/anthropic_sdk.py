"""The official Anthropic and OpenAI Python SDKs against the gateway, unchanged.

Reads a JSON config (argv[1]), prints one JSON object of what the SDKs made of each answer;
every assertion lives in anthropic_sdk.rs.
"""

import json
import sys

import anthropic
import openai

config = json.load(open(sys.argv[1]))
headers = {"X-Svc-Agent-Id": config["agent_id"]}
model = config["model"]
out = {}

# What Claude Code sends with ANTHROPIC_AUTH_TOKEN: the PAT as a bearer token.
claude = anthropic.Anthropic(
    base_url=config["base_url"],
    auth_token=config["token"],
    default_headers=headers,
    max_retries=0,
    timeout=30,
)

message = claude.messages.create(
    model=model,
    max_tokens=64,
    system="Be brief.",
    messages=[{"role": "user", "content": "Say hello."}],
)
out["call"] = {
    "text": message.content[0].text,
    "stop_reason": message.stop_reason,
    "input_tokens": message.usage.input_tokens,
    "output_tokens": message.usage.output_tokens,
}

with claude.messages.stream(
    model=model,
    max_tokens=64,
    messages=[{"role": "user", "content": "Say hello, slowly."}],
) as stream:
    pieces = list(stream.text_stream)
    final = stream.get_final_message()
out["stream"] = {
    "pieces": len(pieces),
    "text": "".join(pieces),
    "stop_reason": final.stop_reason,
    "output_tokens": final.usage.output_tokens,
}

tools = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
turns = [{"role": "user", "content": "Weather in Oslo?"}]
first = claude.messages.create(model=model, max_tokens=64, tools=tools, messages=turns)
use = next(b for b in first.content if b.type == "tool_use")
turns.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
turns.append(
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny"}],
    }
)
second = claude.messages.create(model=model, max_tokens=64, tools=tools, messages=turns)
out["tool"] = {
    "stop_reason": first.stop_reason,
    "name": use.name,
    "input": use.input,
    "then": second.content[0].text,
    "then_stop_reason": second.stop_reason,
}

# Claude Code's first request: the beta namespace (`?beta=true`), a system turn among the
# messages.
beta = claude.beta.messages.create(
    model=model,
    max_tokens=64,
    messages=[{"role": "user", "content": "hi"}, {"role": "system", "content": "Be terse."}],
    betas=["interleaved-thinking-2025-05-14"],
)
counted = claude.messages.count_tokens(
    model=model,
    system="Be brief.",
    messages=[{"role": "user", "content": "Say hello."}],
)
out["beta"] = {"text": beta.content[0].text}
out["count"] = {"input_tokens": counted.input_tokens}

# The OpenAI SDK against the same Claude model, through the translation.
gpt = openai.OpenAI(
    base_url=config["base_url"] + "/v1",
    api_key=config["token"],
    default_headers=headers,
    max_retries=0,
    timeout=30,
)
functions = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
chat = [
    {"role": "system", "content": "Use the tools."},
    {"role": "user", "content": "Weather in Oslo?"},
]
first = gpt.chat.completions.create(model=model, messages=chat, tools=functions, tool_choice="auto")
call = first.choices[0].message.tool_calls[0]
chat.append(first.choices[0].message.model_dump(exclude_none=True))
chat.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny"})
chunks = list(
    gpt.chat.completions.create(
        model=model,
        messages=chat,
        tools=functions,
        stream=True,
        stream_options={"include_usage": True},
    )
)
out["openai"] = {
    "finish_reason": first.choices[0].finish_reason,
    "name": call.function.name,
    "arguments": call.function.arguments,
    "prompt_tokens": first.usage.prompt_tokens,
    "then": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
    "then_finish_reason": [c.choices[0].finish_reason for c in chunks if c.choices][-1],
    "then_completion_tokens": chunks[-1].usage.completion_tokens,
}

print(json.dumps(out))
