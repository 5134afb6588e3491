"""The anthropic SDK: `messages.count_tokens` on a Claude and an OpenAI-compatible model, and a
stream the upstream cuts, which must raise."""

import anthropic

from common import AGENT_HEADER, CONFIG, OUT, case, done

client = anthropic.Anthropic(
    base_url=CONFIG["base_url"],
    auth_token=CONFIG["token"],
    default_headers=AGENT_HEADER,
    max_retries=0,
)
OUT["version"] = anthropic.__version__
MESSAGES = [{"role": "user", "content": "Say hello."}]


for model in ("claude", "gpt"):

    @case(f"count_{model}")
    def count(model=model):
        counted = client.messages.count_tokens(model=CONFIG[model], messages=MESSAGES)
        return {"input_tokens": counted.input_tokens}


@case("cut")
def cut():
    text = []
    try:
        with client.messages.stream(
            model=CONFIG["claude"],
            max_tokens=64,
            messages=[{"role": "user", "content": f"Say {CONFIG['cut_marker']}."}],
        ) as stream:
            for piece in stream.text_stream:
                text.append(piece)
            message = stream.get_final_message()
        return {"raised": False, "text": "".join(text), "stop_reason": message.stop_reason}
    except anthropic.APIError as error:
        return {
            "raised": True,
            "raised_as": type(error).__name__,
            "message": str(error),
            "body": getattr(error, "body", None),
            "text": "".join(text),
        }


done()
