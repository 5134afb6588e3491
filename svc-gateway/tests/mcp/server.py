"""An MCP server built with the official Python SDK (FastMCP over Streamable HTTP), on loopback.

Run as `server.py CONFIG.json`; the config names `ready` (where the port is written once the
socket listens) and `log` (one JSON line per HTTP request: method, headers, and the JSON-RPC
methods and tool names of its body), and with `json_response` the server answers POSTs with
JSON instead of event streams. Tools: `echo`, `add`, and `count`, which reports progress
before it answers.
"""

import asyncio
import json
import socket
import sys

import uvicorn
from mcp.server.fastmcp import Context, FastMCP

config = json.load(open(sys.argv[1]))
log = open(config["log"], "a", buffering=1)

mcp = FastMCP(
    "svc-test",
    host="127.0.0.1",
    log_level="WARNING",
    json_response=bool(config.get("json_response")),
)


@mcp.tool()
def echo(text: str) -> str:
    """Says the text back."""
    return text


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@mcp.tool()
async def count(to: int, ctx: Context) -> str:
    """Counts to `to`, reporting progress at each step."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, to, f"step {step}")
        await asyncio.sleep(0)
    return f"counted to {to}"


app = mcp.streamable_http_app()


class Recorder:
    """Writes what each request carried before the SDK sees it."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.inner(scope, receive, send)
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        calls = []
        try:
            parsed = json.loads(body) if body else None
            for m in parsed if isinstance(parsed, list) else [parsed] if parsed else []:
                calls.append({"method": m.get("method"), "tool": (m.get("params") or {}).get("name")})
        except ValueError:
            pass
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        log.write(json.dumps({"http": scope["method"], "headers": headers, "calls": calls}) + "\n")
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.inner(scope, replay, send)


sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", 0))
sock.listen(64)
port = sock.getsockname()[1]
with open(config["ready"] + ".tmp", "w") as f:
    f.write(str(port))
import os

os.rename(config["ready"] + ".tmp", config["ready"])
server = uvicorn.Server(uvicorn.Config(Recorder(app), log_level="warning", lifespan="on"))
asyncio.run(server.serve(sockets=[sock]))
