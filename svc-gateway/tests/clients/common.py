"""What every Python client script shares: its config, and each case run on its own, its
outcome or its error recorded for the test to assert on."""

import asyncio
import json
import sys
import traceback

CONFIG = json.load(open(sys.argv[1]))
AGENT_HEADER = {"X-SVC-Agent-ID": CONFIG["agent_id"]}
OUT = {}


def case(name):
    """Runs the decorated function (sync or async) now; stores its result, or the error."""

    def run(function):
        try:
            result = function()
            if asyncio.iscoroutine(result):
                result = asyncio.run(result)
            OUT[name] = result
        except Exception as error:  # noqa: BLE001 - every failure is the test's to read
            OUT[name] = {
                "error": type(error).__name__,
                "message": str(error),
                "trace": traceback.format_exc()[-2000:],
            }
        return function

    return run


def done():
    print(json.dumps(OUT))
