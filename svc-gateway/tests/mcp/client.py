"""The official MCP Python SDK's Streamable HTTP client session, through two gateway replicas.

Run as `client.py CONFIG.json`. The session's requests alternate between `urls` (one per
replica), so a session opened on one replica continues on the other. Prints one JSON object
of what the SDK made of each answer; the Rust test asserts on it. `pause` and `resume` are
files: the script writes the first and waits (bounded) for the second while the test changes
the agent's grants.
"""

import asyncio
import json
import os
import sys
import time

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

config = json.load(open(sys.argv[1]))


class Alternate(httpx.AsyncBaseTransport):
    """Sends each request to the next replica in turn."""

    def __init__(self, urls):
        self.urls = [httpx.URL(u) for u in urls]
        self.next = 0
        self.inner = httpx.AsyncHTTPTransport()
        self.seen = []

    async def handle_async_request(self, request):
        target = self.urls[self.next % len(self.urls)]
        self.next += 1
        request.url = request.url.copy_with(host=target.host, port=target.port)
        self.seen.append(target.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


transport = Alternate(config["urls"])


def factory(headers=None, timeout=None, auth=None):
    return httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=transport)


async def names(session):
    listed = await session.list_tools()
    return sorted(tool.name for tool in listed.tools)


async def call(session, tool, arguments, **kw):
    try:
        result = await session.call_tool(tool, arguments, **kw)
        return {"text": [c.text for c in result.content if c.type == "text"], "is_error": result.isError}
    except McpError as error:
        return {"error_code": error.error.code, "error_message": error.error.message}


async def main():
    out = {}
    headers = {"Authorization": f"Bearer {config['token']}", "X-SVC-Agent-ID": config["agent_id"]}
    async with streamablehttp_client(
        config["urls"][0], headers=headers, httpx_client_factory=factory
    ) as (read, write, session_id):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server_name"] = init.serverInfo.name
            out["session_id"] = session_id()
            out["listed_before"] = [await names(session), await names(session)]
            out["echo"] = await call(session, "echo", {"text": "hello"})
            out["add_denied"] = await call(session, "add", {"a": 1, "b": 2})
            progress = []

            async def on_progress(value, total, message):
                progress.append([value, total, message])

            out["count"] = await call(session, "count", {"to": 3}, progress_callback=on_progress)
            out["progress"] = progress
            await session.send_ping()
            out["pinged"] = True

            open(config["pause"], "w").close()
            until = time.monotonic() + 60
            while not os.path.exists(config["resume"]):
                if time.monotonic() > until:
                    raise SystemExit("not resumed")
                await asyncio.sleep(0.05)

            out["listed_after"] = [await names(session), await names(session)]
            out["add_granted"] = await call(session, "add", {"a": 1, "b": 2})
            out["session_id_after"] = session_id()
    out["replicas_used"] = sorted(set(transport.seen))
    print(json.dumps(out))


asyncio.run(main())
