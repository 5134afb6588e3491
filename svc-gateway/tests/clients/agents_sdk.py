"""The OpenAI Agents SDK: an agent with a function tool and an `output_type`, run to its final
output on the Chat Completions model and on the Responses model, each against an OpenAI and a
Claude model."""

import agents
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from pydantic import BaseModel

from common import AGENT_HEADER, CONFIG, OUT, case, done

set_tracing_disabled(True)
OUT["version"] = agents.__version__ if hasattr(agents, "__version__") else None


class Weather(BaseModel):
    city: str
    temperature_c: float
    summary: str


CALLS = []


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    CALLS.append(city)
    return f"Sunny in {city}, 21 C."


def client():
    return AsyncOpenAI(
        base_url=CONFIG["base_url"] + "/v1",
        api_key=CONFIG["token"],
        default_headers=AGENT_HEADER,
        max_retries=0,
    )


MODELS = {"chat": OpenAIChatCompletionsModel, "responses": OpenAIResponsesModel}

for api, Model in MODELS.items():
    for family in ("gpt", "claude"):

        @case(f"{api}_{family}")
        async def run(Model=Model, family=family):
            CALLS.clear()
            agent = Agent(
                name="weather",
                instructions="Use the tool, then answer.",
                tools=[get_weather],
                output_type=Weather,
                model=Model(model=CONFIG[family], openai_client=client()),
            )
            result = await Runner.run(agent, "What is the weather in Oslo?", max_turns=4)
            return {
                "type": type(result.final_output).__name__,
                "final": result.final_output.model_dump(),
                "tool_calls": list(CALLS),
            }


done()
