"""The official Anthropic and OpenAI Python SDKs, unchanged, on streams that break midway.

Run by tests/it/stream_errors_sdk.rs: `python stream_errors_sdk.py CONFIG.json`, where the file
holds {base_url, token, agent_id, model}. For each route it records whether the SDK raised, with
what class, code and request id, and the text it had before; the Rust side asserts. The result
is one JSON object on stdout.
"""

import json
import sys

import anthropic
import openai

config = json.load(open(sys.argv[1]))
headers = {"X-Svc-Agent-Id": config["agent_id"]}
model = config["model"]
say = [{"role": "user", "content": "Say hello."}]
out = {}

claude = anthropic.Anthropic(
    base_url=config["base_url"],
    auth_token=config["token"],
    default_headers=headers,
    max_retries=0,
    timeout=30,
)
gpt = openai.OpenAI(
    base_url=config["base_url"] + "/v1",
    api_key=config["token"],
    default_headers=headers,
    max_retries=0,
    timeout=30,
)


def raised(error, text, body):
    body = body if isinstance(body, dict) else {}
    inner = body.get("error") if isinstance(body.get("error"), dict) else body
    return {
        "class": type(error).__name__,
        "code": inner.get("code"),
        "type": inner.get("type"),
        "request_id": inner.get("request_id"),
        "text": "".join(text),
    }


def messages_raw():
    text = []
    try:
        for event in claude.messages.create(model=model, max_tokens=64, messages=say, stream=True):
            if event.type == "content_block_delta":
                text.append(event.delta.text)
    except anthropic.APIError as error:
        return raised(error, text, error.body)
    return {"class": None, "text": "".join(text)}


def messages_helper():
    text = []
    try:
        with claude.messages.stream(model=model, max_tokens=64, messages=say) as stream:
            for piece in stream.text_stream:
                text.append(piece)
            stream.get_final_message()
    except anthropic.APIError as error:
        return raised(error, text, error.body)
    return {"class": None, "text": "".join(text)}


def responses():
    text = []
    try:
        for event in gpt.responses.create(model=model, input="Say hello.", stream=True):
            if event.type == "response.output_text.delta":
                text.append(event.delta)
    except openai.APIError as error:
        return raised(error, text, error.body) | {"sdk_code": error.code}
    return {"class": None, "text": "".join(text)}


def chat():
    text = []
    try:
        for chunk in gpt.chat.completions.create(model=model, messages=say, stream=True):
            text.extend(choice.delta.content or "" for choice in chunk.choices)
    except openai.APIError as error:
        return raised(error, text, error.body) | {"sdk_code": error.code}
    return {"class": None, "text": "".join(text)}


out["messages"] = messages_raw()
out["messages_helper"] = messages_helper()
out["responses"] = responses()
out["chat"] = chat()
print(json.dumps(out))
