"""The openai SDK's `parse()` helpers against the gateway's mock (dev mode): tool arguments and
structured outputs come back valid against their schemas, checked with jsonschema too."""

import json

import jsonschema
import openai
from pydantic import BaseModel

from common import AGENT_HEADER, CONFIG, OUT, case, done

client = openai.OpenAI(
    base_url=CONFIG["base_url"] + "/v1",
    api_key=CONFIG["token"],
    default_headers=AGENT_HEADER,
    max_retries=0,
)
OUT["version"] = openai.__version__


class Address(BaseModel):
    city: str
    zip_code: str


class Person(BaseModel):
    name: str
    age: int
    email: str
    nickname: str | None
    addresses: list[Address]


TOOL = openai.pydantic_function_tool(Person, name="save_person")
SCHEMA = TOOL["function"]["parameters"]


@case("chat_parse")
def chat_parse():
    completion = client.chat.completions.parse(
        model=CONFIG["model"],
        messages=[{"role": "user", "content": "A person, please."}],
        response_format=Person,
    )
    parsed = completion.choices[0].message.parsed
    jsonschema.validate(parsed.model_dump(), SCHEMA)
    return {"type": type(parsed).__name__, "parsed": parsed.model_dump()}


@case("chat_stream_parse")
def chat_stream_parse():
    with client.chat.completions.stream(
        model=CONFIG["model"],
        messages=[{"role": "user", "content": "A person, please."}],
        response_format=Person,
    ) as stream:
        final = stream.get_final_completion()
    return {"parsed": final.choices[0].message.parsed.model_dump()}


@case("chat_tool")
def chat_tool():
    completion = client.chat.completions.parse(
        model=CONFIG["model"],
        messages=[{"role": "user", "content": "Save a person."}],
        tools=[TOOL],
    )
    call = completion.choices[0].message.tool_calls[0]
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, SCHEMA)
    return {"name": call.function.name, "parsed": call.function.parsed_arguments.model_dump()}


@case("responses_parse")
def responses_parse():
    if not hasattr(client.responses, "parse"):
        return {"skipped": "this SDK has no responses.parse"}
    response = client.responses.parse(
        model=CONFIG["model"], input="A person, please.", text_format=Person
    )
    jsonschema.validate(response.output_parsed.model_dump(), SCHEMA)
    return {"parsed": response.output_parsed.model_dump()}


@case("responses_tool")
def responses_tool():
    response = client.responses.create(
        model=CONFIG["model"],
        input="Save a person.",
        tools=[{"type": "function", "name": "save_person", "parameters": SCHEMA, "strict": True}],
    )
    call = response.output[0]
    arguments = json.loads(call.arguments)
    jsonschema.validate(arguments, SCHEMA)
    return {"name": call.name, "arguments": arguments}


@case("messages_tool")
def messages_tool():
    import anthropic

    claude = anthropic.Anthropic(
        base_url=CONFIG["base_url"],
        auth_token=CONFIG["token"],
        default_headers=AGENT_HEADER,
        max_retries=0,
    )
    with claude.messages.stream(
        model=CONFIG["model"],
        max_tokens=256,
        messages=[{"role": "user", "content": "Save a person."}],
        tools=[{"name": "save_person", "input_schema": SCHEMA}],
    ) as stream:
        message = stream.get_final_message()
    block = message.content[0]
    jsonschema.validate(block.input, SCHEMA)
    return {"name": block.name, "input": block.input}


done()
