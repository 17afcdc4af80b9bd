"""The Python SDK client (`mcp` 2.3) against a hub whose tools are searched; prints what it
saw as one JSON object.

    python client.py MODE stdio COMMAND ARGS_JSON
    python client.py MODE http URL

MODE: legacy (initialize; permission prompts come as elicitation/create requests) or auto
(2026-07-28 when the hub offers it; prompts come as input-required results, which the SDK
fulfils through the same callback).

It lists the tools, searches them, then reaches the fixture's tools through call_tool: echo
(the prompt answered "once"), echo again (answered "deny"), and progress (answered "once",
with a progress callback).
"""

import asyncio
import json
import sys

import mcp.types as types
from mcp import Client, StdioServerParameters


def dump(r):
    return r.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main():
    mode, transport = sys.argv[1], sys.argv[2]
    if transport == "stdio":
        server = StdioServerParameters(command=sys.argv[3], args=json.loads(sys.argv[4]))
    else:
        server = sys.argv[3]

    answers = [
        {"action": "accept", "content": {"decision": "once"}},
        {"action": "accept", "content": {"decision": "deny"}},
        {"action": "accept", "content": {"decision": "once"}},
    ]
    asked, progress = [], []

    async def on_elicit(context, params):
        asked.append(dump(params))
        if not answers:
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(**answers.pop(0))

    async def on_progress(p, total, message):
        progress.append({"progress": p, "total": total, "message": message})

    out = {"mode": mode}
    async with Client(server, mode=mode, read_timeout_seconds=60,
                      elicitation_callback=on_elicit) as client:
        out["protocolVersion"] = client.session.protocol_version
        out["tools"] = [dump(t) for t in (await client.list_tools()).tools]
        out["search"] = dump(await client.call_tool(
            "search_tools", {"query": "repeat my message back"}))
        out["searchAdd"] = dump(await client.call_tool(
            "search_tools", {"query": "add two numbers", "limit": 1}))
        out["askedAfterSearch"] = len(asked)
        echo = out["search"]["structuredContent"]["tools"][0]["name"]
        if client.session.protocol_version == "2026-07-28":
            # The prompt as it comes: an input-required result, left unanswered here.
            out["inputRequired"] = dump(await client.session.call_tool(
                "call_tool", {"name": echo, "arguments": {"message": "py unanswered"}},
                allow_input_required=True))
        out["once"] = dump(await client.call_tool(
            "call_tool", {"name": echo, "arguments": {"message": "py reached it"}}))
        out["denied"] = dump(await client.call_tool(
            "call_tool", {"name": echo, "arguments": {"message": "py refused"}}))
        out["progress"] = dump(await client.call_tool(
            "call_tool", {"name": "fx:progress", "arguments": {"steps": 3, "ms": 20}},
            progress_callback=on_progress))
        out["progressSeen"] = progress
        # The pinned tool, called by its own name (allowed without a prompt).
        out["add"] = dump(await client.call_tool("fx:add", {"a": 2, "b": 3}))
    out["asked"] = asked
    print(json.dumps(out))


asyncio.run(main())
