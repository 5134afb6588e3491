"""The official OpenAI Python SDK against svc-gateway, unchanged.

Run by tests/it/openai_sdk.rs: `python openai_sdk.py CONFIG.json`, where the file holds
{base_url, token, agent_id, suspended_agent_id, model, hold_model, release_model, cut_model}. Every check
records what the SDK observed, never a verdict: the Rust side asserts, so each observation can
fail there. The whole result is one JSON object on stdout.

A transport hook records the status and retry headers of every HTTP response the SDK sees, so
a check can tell how often the SDK retried and why.
"""

import json
import sys
import threading
import uuid

import openai
from openai import OpenAI

with open(sys.argv[1], encoding="utf-8") as config_file:
    CONFIG = json.load(config_file)

MESSAGES = [{"role": "user", "content": "Say hello."}]
# Bounds every call, so a wedged request fails the run instead of hanging it.
TIMEOUT_SECONDS = 30
# How long the in-progress check waits for the SDK to see the 409.
CONFLICT_WAIT_SECONDS = 30

SEEN = []
SEEN_LOCK = threading.Lock()


def record(response):
    headers = response.headers
    with SEEN_LOCK:
        SEEN.append(
            {
                "status": response.status_code,
                "retry_after": headers.get("retry-after"),
                "should_retry": headers.get("x-should-retry"),
                "replayed": headers.get("idempotent-replayed"),
                "idempotency_key": response.request.headers.get("idempotency-key"),
                "retry_count": response.request.headers.get("x-stainless-retry-count"),
            }
        )


def seen_since(mark):
    with SEEN_LOCK:
        return SEEN[mark:]


def mark():
    with SEEN_LOCK:
        return len(SEEN)


def client(token=None, agent_id=None, **options):
    headers = {} if agent_id is False else {"X-SVC-Agent-ID": agent_id or CONFIG["agent_id"]}
    return OpenAI(
        base_url=CONFIG["base_url"],
        api_key=token or CONFIG["token"],
        default_headers=headers,
        timeout=TIMEOUT_SECONDS,
        http_client=openai.DefaultHttpxClient(
            timeout=TIMEOUT_SECONDS, event_hooks={"response": [record]}
        ),
        **options,
    )


SDK = client()


def create(sdk=SDK, **overrides):
    arguments = {"model": CONFIG["model"], "messages": MESSAGES}
    arguments.update(overrides)
    return sdk.chat.completions.create(**arguments)


def status_error(call):
    """Runs `call`, which must raise an APIStatusError; returns what the SDK made of it."""
    start = mark()
    try:
        call()
    except openai.APIStatusError as error:
        body = error.body if isinstance(error.body, dict) else {}
        return {
            "class": type(error).__name__,
            "status": error.status_code,
            "code": error.code,
            "type": error.type,
            "param": error.param,
            "message": error.message,
            "body_code": body.get("code"),
            "body_message": body.get("message"),
            "body_request_id": body.get("request_id"),
            "request_id": error.request_id,
            "attempts": seen_since(start),
        }
    return {"class": None, "attempts": seen_since(start)}


def check_create():
    start = mark()
    reply = create()
    return {
        "class": type(reply).__name__,
        "object": reply.object,
        "model": reply.model,
        "content": reply.choices[0].message.content,
        "role": reply.choices[0].message.role,
        "finish_reason": reply.choices[0].finish_reason,
        "usage": reply.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"}),
        "request_id": getattr(reply, "_request_id", None),
        "attempts": seen_since(start),
    }


def summarize(chunks):
    text = "".join(
        chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices
    )
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    return {
        "chunks": len(chunks),
        "classes": sorted({type(chunk).__name__ for chunk in chunks}),
        "objects": sorted({chunk.object for chunk in chunks}),
        "ids": len({chunk.id for chunk in chunks}),
        "text": text,
        "finish_reasons": finishes,
        "usage": [
            chunk.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
            for chunk in chunks
            if chunk.usage is not None
        ],
    }


def check_stream():
    # Iterating to the end means the SDK met `data: [DONE]` (or the end of the body).
    stream = create(stream=True)
    result = summarize(list(stream))
    result["response_closed"] = stream.response.is_closed
    return result


def check_stream_usage():
    return summarize(list(create(stream=True, stream_options={"include_usage": True})))


def check_stream_cut():
    # The provider dies mid-event after one chunk: the SDK must meet our error event, not a
    # fragment it cannot parse.
    text = []
    try:
        for chunk in create(model=CONFIG["cut_model"], stream=True):
            text.extend(choice.delta.content or "" for choice in chunk.choices)
    except openai.APIError as error:
        body = error.body if isinstance(error.body, dict) else {}
        return {
            "class": type(error).__name__,
            "code": error.code,
            "message": error.message,
            "body_request_id": body.get("request_id"),
            "text": "".join(text),
        }
    return {"class": None, "text": "".join(text)}


def check_raw():
    raw = SDK.chat.completions.with_raw_response.create(model=CONFIG["model"], messages=MESSAGES)
    completion = raw.parse()
    raw_stream = SDK.chat.completions.with_raw_response.create(
        model=CONFIG["model"], messages=MESSAGES, stream=True
    )
    streamed = summarize(list(raw_stream.parse()))
    return {
        "status": raw.status_code,
        "content_type": raw.headers.get("content-type"),
        "request_id": raw.headers.get("x-request-id"),
        "parsed_request_id": getattr(completion, "_request_id", None),
        "content": completion.choices[0].message.content,
        "stream_status": raw_stream.status_code,
        "stream_content_type": raw_stream.headers.get("content-type"),
        "stream_text": streamed["text"],
    }


def check_sdk_headers():
    # The SDK's own headers, with organization and project set as well, must not bother us.
    captured = {}

    def capture(request):
        captured.update({name.lower(): value for name, value in request.headers.items()})

    sdk = OpenAI(
        base_url=CONFIG["base_url"],
        api_key=CONFIG["token"],
        default_headers={"X-SVC-Agent-ID": CONFIG["agent_id"]},
        organization="org-sdk-check",
        project="proj_sdk_check",
        timeout=TIMEOUT_SECONDS,
        http_client=openai.DefaultHttpxClient(
            timeout=TIMEOUT_SECONDS, event_hooks={"request": [capture]}
        ),
    )
    reply = create(sdk)
    return {
        "content": reply.choices[0].message.content,
        "sent": sorted(
            name
            for name in captured
            if name.startswith("x-stainless-")
            or name in ("user-agent", "openai-organization", "openai-project")
        ),
        "sent_idempotency_key": captured.get("idempotency-key"),
    }


def check_replay():
    key = f"sdk-{uuid.uuid4()}"
    start = mark()
    first = create(extra_headers={"Idempotency-Key": key})
    again = SDK.chat.completions.with_raw_response.create(
        model=CONFIG["model"], messages=MESSAGES, extra_headers={"Idempotency-Key": key}
    )
    # Without a key every call is a new completion: the SDK adds no key of its own.
    unkeyed = [create().id, create().id]
    return {
        "key": key,
        "first_id": first.id,
        "replay_id": again.parse().id,
        "replay_status": again.status_code,
        "replayed_header": again.headers.get("idempotent-replayed"),
        "unkeyed_ids": unkeyed,
        "attempts": seen_since(start),
    }


def check_key_reuse(key):
    other = [{"role": "user", "content": "A different question."}]
    return status_error(lambda: create(messages=other, extra_headers={"Idempotency-Key": key}))


def check_in_progress():
    """Two identical keyed calls at once: one holds the claim until the other saw its 409.

    The hold model answers only after the release model was asked, so whichever call claims the
    key first stays in flight; the other meets 409 IDEMPOTENCY_IN_PROGRESS, and the SDK retries
    it after Retry-After, by when the first has committed and the retry is a replay.
    """
    key = f"sdk-{uuid.uuid4()}"
    conflict = threading.Event()
    outcomes = {}

    def watch(response):
        if response.status_code == 409:
            conflict.set()

    def call(name):
        sdk = OpenAI(
            base_url=CONFIG["base_url"],
            api_key=CONFIG["token"],
            default_headers={"X-SVC-Agent-ID": CONFIG["agent_id"]},
            timeout=TIMEOUT_SECONDS,
            http_client=openai.DefaultHttpxClient(
                timeout=TIMEOUT_SECONDS, event_hooks={"response": [record, watch]}
            ),
        )
        try:
            raw = sdk.chat.completions.with_raw_response.create(
                model=CONFIG["hold_model"],
                messages=MESSAGES,
                extra_headers={"Idempotency-Key": key},
            )
            outcomes[name] = {
                "status": raw.status_code,
                "id": raw.parse().id,
                "replayed": raw.headers.get("idempotent-replayed"),
                "retry_count": raw.http_request.headers.get("x-stainless-retry-count"),
            }
        except Exception as error:  # reported, asserted on the Rust side
            outcomes[name] = {"error": repr(error)}

    start = mark()
    threads = [threading.Thread(target=call, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    saw_conflict = conflict.wait(CONFLICT_WAIT_SECONDS)
    create(model=CONFIG["release_model"])
    for thread in threads:
        thread.join(TIMEOUT_SECONDS * 3)
    attempts = [a for a in seen_since(start) if a["idempotency_key"] == key]
    return {"saw_conflict": saw_conflict, "calls": outcomes, "attempts": attempts}


def check_rate_limit():
    # Last: it spends the org's budget. Without retries the first 429 surfaces as is.
    sdk = client(max_retries=0)
    for sent in range(1, 500):
        try:
            create(sdk)
        except openai.RateLimitError as error:
            return {
                "sent": sent,
                "class": type(error).__name__,
                "code": error.code,
                "retry_after": error.response.headers.get("retry-after"),
                "limit": error.response.headers.get("x-ratelimit-limit"),
                "remaining": error.response.headers.get("x-ratelimit-remaining"),
            }
    return {"sent": sent, "class": None}


def guarded(check, *args):
    try:
        return check(*args)
    except Exception as error:  # reported, asserted on the Rust side
        return {"unexpected": repr(error)}


def main():
    results = {"sdk_version": openai.__version__}
    results["create"] = guarded(check_create)
    results["stream"] = guarded(check_stream)
    results["stream_usage"] = guarded(check_stream_usage)
    results["stream_cut"] = guarded(check_stream_cut)
    results["raw"] = guarded(check_raw)
    results["sdk_headers"] = guarded(check_sdk_headers)
    results["bad_token"] = guarded(
        status_error,
        lambda: create(client(token="svc_pat_00000000-0000-4000-8000-000000000000_wrong")),
    )
    results["missing_agent"] = guarded(status_error, lambda: create(client(agent_id=False)))
    results["suspended_agent"] = guarded(
        status_error, lambda: create(client(agent_id=CONFIG["suspended_agent_id"]))
    )
    results["unknown_model"] = guarded(status_error, lambda: create(model="no-such-model"))
    results["unknown_model_stream"] = guarded(
        status_error, lambda: list(create(model="no-such-model", stream=True))
    )
    results["invalid"] = guarded(status_error, lambda: create(messages=[]))
    results["replay"] = guarded(check_replay)
    results["key_reuse"] = guarded(check_key_reuse, results["replay"].get("key", "missing"))
    results["in_progress"] = guarded(check_in_progress)
    results["rate_limit"] = guarded(check_rate_limit)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
