"""The whole OpenAI surface through svc-gateway, with the official Python SDK, unchanged.

Run by tests/it/openai_sdk_surface.rs: `python openai_sdk_surface.py CONFIG.json`, where the file
holds {base_url, token, agent_id, model, embedding_model}. Each check records what the SDK made
of the answers, never a verdict: the Rust side asserts. A transport hook records every
exchange (the request body as sent, its Authorization and Idempotency-Key, the answer's status
and X-Request-ID), so the Rust side can hold what the upstream received against what the
client sent. The whole result is one JSON object on stdout.
"""

import json
import sys
import threading
import uuid

import openai
from openai import OpenAI

with open(sys.argv[1], encoding="utf-8") as config_file:
    CONFIG = json.load(config_file)

# Bounds every call, so a wedged request fails the run instead of hanging it.
TIMEOUT_SECONDS = 30
# A 1x1 transparent PNG.
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
]
WEATHER_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "weather",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"}},
            "required": ["city", "temperature_c"],
            "additionalProperties": False,
        },
    },
}
USAGE_FIELDS = {"prompt_tokens", "completion_tokens", "total_tokens"}

EXCHANGES = []
LOCK = threading.Lock()


def record(response):
    request = response.request
    with LOCK:
        EXCHANGES.append(
            {
                "method": request.method,
                "path": request.url.path,
                "body": request.content.decode("utf-8") if request.content else None,
                "authorization": request.headers.get("authorization"),
                "idempotency_key": request.headers.get("idempotency-key"),
                "status": response.status_code,
                "request_id": response.headers.get("x-request-id"),
                "replayed": response.headers.get("idempotent-replayed"),
            }
        )


SDK = OpenAI(
    base_url=CONFIG["base_url"],
    api_key=CONFIG["token"],
    default_headers={"X-SVC-Agent-ID": CONFIG["agent_id"]},
    timeout=TIMEOUT_SECONDS,
    max_retries=0,
    http_client=openai.DefaultHttpxClient(timeout=TIMEOUT_SECONDS, event_hooks={"response": [record]}),
)


def chat(**arguments):
    return SDK.chat.completions.create(model=CONFIG["model"], **arguments)


def usage_of(usage):
    return usage.model_dump(include=USAGE_FIELDS) if usage is not None else None


def check_tools():
    """An agent loop's two turns: the model calls the tool, then answers from its result."""
    messages = [
        {"role": "system", "content": "You answer questions about the weather."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ]
    first = chat(
        messages=messages,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    message = first.choices[0].message
    call = message.tool_calls[0]
    # The SDK's own message object goes back as the assistant turn, as agent loops do.
    messages.append(message)
    messages.append(
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 21})}
    )
    second = chat(messages=messages, tools=TOOLS, tool_choice="auto")
    return {
        "first_finish": first.choices[0].finish_reason,
        "first_content": message.content,
        "call_type": call.type,
        "call_id": call.id,
        "call_name": call.function.name,
        "call_arguments": json.loads(call.function.arguments),
        "second_finish": second.choices[0].finish_reason,
        "second_content": second.choices[0].message.content,
        "second_calls": len(second.choices[0].message.tool_calls or []),
        "usage": usage_of(second.usage),
    }


def check_vision():
    reply = chat(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this image?"},
                    {"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}},
                ],
            }
        ]
    )
    return {"content": reply.choices[0].message.content, "usage": usage_of(reply.usage)}


def check_json_schema():
    reply = chat(
        messages=[{"role": "user", "content": "The weather in Paris, as JSON."}],
        response_format=WEATHER_SCHEMA,
    )
    content = reply.choices[0].message.content
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    return {"content": content, "parsed": parsed, "finish": reply.choices[0].finish_reason}


def summarize(chunks):
    return {
        "chunks": len(chunks),
        "classes": sorted({type(chunk).__name__ for chunk in chunks}),
        "ids": len({chunk.id for chunk in chunks}),
        "text": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
        "finish_reasons": [
            c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
        ],
        "usage": [usage_of(c.usage) for c in chunks if c.usage is not None],
    }


def check_streams():
    messages = [{"role": "user", "content": "Say hello."}]
    plain = chat(messages=messages, stream=True)
    asked = chat(messages=messages, stream=True, stream_options={"include_usage": True})
    return {"plain": summarize(list(plain)), "with_usage": summarize(list(asked))}


def vectors(reply):
    return [[float(x) for x in item.embedding] for item in reply.data]


def check_embeddings():
    inputs = ["The first input.", "The second input."]
    model = CONFIG["embedding_model"]
    # Without encoding_format the SDK asks for base64 and decodes it.
    default = SDK.embeddings.create(model=model, input=inputs)
    floats = SDK.embeddings.create(model=model, input=inputs, encoding_format="float")
    key = f"sdk-{uuid.uuid4()}"
    keyed = [
        SDK.embeddings.with_raw_response.create(
            model=model, input="Keyed input.", dimensions=4, extra_headers={"Idempotency-Key": key}
        )
        for _ in range(2)
    ]
    return {
        "object": default.object,
        "model": default.model,
        "indexes": [item.index for item in default.data],
        "default": vectors(default),
        "float": vectors(floats),
        "usage": default.usage.model_dump(include={"prompt_tokens", "total_tokens"}),
        "keyed": [vectors(raw.parse()) for raw in keyed],
        "keyed_replayed": [raw.headers.get("idempotent-replayed") for raw in keyed],
    }


def response_usage(usage):
    return usage.model_dump(include={"input_tokens", "output_tokens", "total_tokens"})


def check_responses():
    arguments = {"model": CONFIG["model"], "input": "Say hello.", "instructions": "Answer briefly."}
    key = f"sdk-{uuid.uuid4()}"
    keyed = [
        SDK.responses.with_raw_response.create(**arguments, extra_headers={"Idempotency-Key": key})
        for _ in range(2)
    ]
    first, again = (raw.parse() for raw in keyed)
    events = list(SDK.responses.create(**arguments, stream=True))
    completed = [e.response for e in events if e.type == "response.completed"]
    with SDK.responses.stream(**arguments) as stream:
        final = stream.get_final_response()
    return {
        "object": first.object,
        "status": first.status,
        "text": first.output_text,
        "usage": response_usage(first.usage),
        "ids": [first.id, again.id],
        "replayed": [raw.headers.get("idempotent-replayed") for raw in keyed],
        "event_types": [e.type for e in events],
        "deltas": "".join(e.delta for e in events if e.type == "response.output_text.delta"),
        "completed_text": completed[0].output_text if completed else None,
        "completed_usage": response_usage(completed[0].usage) if completed else None,
        "helper_text": final.output_text,
        "helper_status": final.status,
    }


def check_models():
    listed = list(SDK.models.list())
    one = SDK.models.retrieve(CONFIG["model"])
    try:
        SDK.models.retrieve("no-such-model")
        missing = {"class": None}
    except openai.APIStatusError as error:
        missing = {"class": type(error).__name__, "status": error.status_code, "code": error.code}
    return {
        "ids": [m.id for m in listed],
        "objects": sorted({m.object for m in listed}),
        "retrieved": {"id": one.id, "object": one.object, "owned_by": one.owned_by},
        "created": one.created,
        "missing": missing,
    }


def guarded(check):
    try:
        return check()
    except Exception as error:  # reported, asserted on the Rust side
        return {"unexpected": repr(error)}


def main():
    results = {"sdk_version": openai.__version__}
    for name, check in [
        ("tools", check_tools),
        ("vision", check_vision),
        ("json_schema", check_json_schema),
        ("streams", check_streams),
        ("embeddings", check_embeddings),
        ("responses", check_responses),
        ("models", check_models),
    ]:
        results[name] = guarded(check)
    results["exchanges"] = EXCHANGES
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
