"""The official OpenAI and Anthropic Python SDKs across protocols, unchanged: the OpenAI SDK's
Responses API and structured output against a Claude model, the Anthropic SDK against an
OpenAI-compatible model.

Reads a JSON config (argv[1]), prints one JSON object of what the SDKs made of each answer;
every assertion lives in translation_sdk.rs.
"""

import json
import sys

import anthropic
import openai
from pydantic import BaseModel

config = json.load(open(sys.argv[1]))
headers = {"X-Svc-Agent-Id": config["agent_id"]}
out = {}

gpt = openai.OpenAI(
    base_url=config["base_url"] + "/v1",
    api_key=config["token"],
    default_headers=headers,
    max_retries=0,
    timeout=30,
)
claude_model = config["claude_model"]

# The Responses API against a Claude model: a function tool, its result, the answer streamed.
tools = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    }
]
first = gpt.responses.create(
    model=claude_model,
    instructions="Use the tools.",
    input="Weather in Oslo?",
    tools=tools,
    max_output_tokens=200,
)
call = next(item for item in first.output if item.type == "function_call")
turns = [
    {"role": "user", "content": "Weather in Oslo?"},
    call.model_dump(exclude_none=True),
    {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"},
]
kinds = []
deltas = []
completed = None
for event in gpt.responses.create(model=claude_model, input=turns, tools=tools, stream=True):
    kinds.append(event.type)
    if event.type == "response.output_text.delta":
        deltas.append(event.delta)
    if event.type == "response.completed":
        completed = event.response
with gpt.responses.stream(model=claude_model, input=turns, tools=tools) as stream:
    helper_text = "".join(
        e.delta for e in stream if e.type == "response.output_text.delta"
    )
    helper_final = stream.get_final_response()
out["responses"] = {
    "status": first.status,
    "call_name": call.name,
    "call_arguments": call.arguments,
    "call_id": call.call_id,
    "input_tokens": first.usage.input_tokens,
    "kinds": kinds,
    "deltas": len(deltas),
    "text": "".join(deltas),
    "output_text": completed.output_text,
    "output_tokens": completed.usage.output_tokens,
    "helper_text": helper_text,
    "helper_output_text": helper_final.output_text,
}


# Structured output against a Claude model, parsed into a pydantic model.
class Person(BaseModel):
    name: str
    age: int


parsed = gpt.chat.completions.parse(
    model=claude_model,
    messages=[{"role": "user", "content": "Who wrote the first program?"}],
    response_format=Person,
)
person = parsed.choices[0].message.parsed
answered = gpt.responses.parse(
    model=claude_model,
    input="Who wrote the first program?",
    text_format=Person,
)
out["parse"] = {
    "finish_reason": parsed.choices[0].finish_reason,
    "person": person.model_dump(),
    "responses_person": answered.output_parsed.model_dump(),
}

# The Anthropic SDK against an OpenAI-compatible model: a tool, its result, and a stream.
claude = anthropic.Anthropic(
    base_url=config["base_url"],
    auth_token=config["token"],
    default_headers=headers,
    max_retries=0,
    timeout=30,
)
gpt_model = config["openai_model"]
anthropic_tools = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
messages = [{"role": "user", "content": "Weather in Oslo?"}]
first = claude.messages.create(
    model=gpt_model,
    max_tokens=64,
    system="Be brief.",
    tools=anthropic_tools,
    messages=messages,
)
use = next(b for b in first.content if b.type == "tool_use")
messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
messages.append(
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny"}],
    }
)
with claude.messages.stream(
    model=gpt_model, max_tokens=64, tools=anthropic_tools, messages=messages
) as stream:
    pieces = list(stream.text_stream)
    final = stream.get_final_message()
with claude.messages.stream(
    model=gpt_model,
    max_tokens=64,
    tools=anthropic_tools,
    messages=[{"role": "user", "content": "Weather in Bergen?"}],
) as stream:
    streamed_call = stream.get_final_message()
streamed_use = next(b for b in streamed_call.content if b.type == "tool_use")
out["messages"] = {
    "stop_reason": first.stop_reason,
    "name": use.name,
    "input": use.input,
    "input_tokens": first.usage.input_tokens,
    "output_tokens": first.usage.output_tokens,
    "pieces": len(pieces),
    "then": "".join(pieces),
    "then_stop_reason": final.stop_reason,
    "then_input_tokens": final.usage.input_tokens,
    "then_output_tokens": final.usage.output_tokens,
    "streamed_stop_reason": streamed_call.stop_reason,
    "streamed_tool": streamed_use.name,
    "streamed_input": streamed_use.input,
}

print(json.dumps(out))
