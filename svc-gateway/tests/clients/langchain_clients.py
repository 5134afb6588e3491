"""LangChain: `ChatOpenAI(...).with_structured_output` (an OpenAI and a Claude model behind the
gateway's OpenAI route), and `ChatAnthropic` with a tool, run through one tool loop."""

import langchain_anthropic
import langchain_openai
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from common import AGENT_HEADER, CONFIG, OUT, case, done

OUT["versions"] = {
    "langchain-openai": getattr(langchain_openai, "__version__", None),
    "langchain-anthropic": getattr(langchain_anthropic, "__version__", None),
}


class Weather(BaseModel):
    city: str
    temperature_c: float
    summary: str


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny in {city}, 21 C."


for family in ("gpt", "claude"):

    @case(f"structured_{family}")
    def structured(family=family):
        llm = ChatOpenAI(
            model=CONFIG[family],
            base_url=CONFIG["base_url"] + "/v1",
            api_key=CONFIG["token"],
            default_headers=AGENT_HEADER,
            max_retries=0,
        )
        weather = llm.with_structured_output(Weather).invoke("The weather in Oslo, please.")
        return {"type": type(weather).__name__, "final": weather.model_dump()}


@case("anthropic_tool")
def anthropic_tool():
    # The gateway reads the PAT as a bearer token, as ANTHROPIC_AUTH_TOKEN sends it.
    llm = ChatAnthropic(
        model=CONFIG["claude"],
        base_url=CONFIG["base_url"],
        api_key=CONFIG["token"],
        default_headers={"Authorization": f"Bearer {CONFIG['token']}", **AGENT_HEADER},
        max_retries=0,
    ).bind_tools([get_weather])
    messages = [HumanMessage("What is the weather in Oslo?")]
    first = llm.invoke(messages)
    messages.append(first)
    for call in first.tool_calls:
        messages.append(get_weather.invoke(call))
    final = llm.invoke(messages)
    return {
        "tool_calls": [{"name": c["name"], "args": c["args"]} for c in first.tool_calls],
        "final": final.text() if callable(getattr(final, "text", None)) else final.content,
    }


done()
