"""The Python SDK client (`mcp` 2.3) against the hub's HTTP face; prints what it saw as one
JSON object.

    python client.py URL MODE

MODE: legacy (initialize, a session) or 2026-07-28 (the pinned revision, stateless).
"""

import asyncio
import json
import sys
import time

import anyio
import mcp.types as types
from mcp import Client


def dump(r):
    return r.model_dump(mode="json", by_alias=True, exclude_none=True)


def text(r):
    return r.content[0].text if r.content else ""


async def main():
    url, mode = sys.argv[1], sys.argv[2]
    modern = mode != "legacy"
    asked, progress, updated = [], [], []

    # The permission prompt: a legacy elicitation/create request and, on 2026-07-28, the
    # SDK's fulfilment of an input-required result both land here.
    async def on_elicit(context, params):
        asked.append(dump(params))
        return types.ElicitResult(action="accept", content={"decision": "once"})

    async def on_progress(p, total, message):
        progress.append({"progress": p, "total": total})

    async def on_message(message):
        m = getattr(message, "root", message)
        if getattr(m, "method", None) == "notifications/resources/updated":
            updated.append(str(m.params.uri))

    out = {"mode": mode}
    async with Client(url, mode=mode, read_timeout_seconds=60,
                      elicitation_callback=on_elicit, message_handler=on_message) as client:
        out["protocolVersion"] = client.session.protocol_version
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        out["echo"] = dump(await client.call_tool("fx:echo", {"message": "py over http"}))
        out["progress"] = dump(await client.call_tool(
            "fx:progress", {"steps": 3, "ms": 20}, progress_callback=on_progress))
        out["progressSeen"] = progress
        if modern:
            # The prompt as it comes: an input-required result, left unanswered here.
            out["inputRequired"] = dump(await client.session.call_tool(
                "fx:add", {"a": 2, "b": 3}, allow_input_required=True))
        out["add"] = dump(await client.call_tool("fx:add", {"a": 2, "b": 3}))
        out["asked"] = asked

        if not modern:
            # A subscription, by the URI the hub lists; the fixture's touch announces a change.
            out["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
            uri = next(u for u in out["resources"] if u.endswith("/static/1"))
            await client.subscribe_resource(uri)
            out["touch"] = dump(await client.call_tool("fx:touch", {"uri": uri}))
            with anyio.move_on_after(10):
                while uri not in updated:
                    await anyio.sleep(0.02)
            out["subscribed"], out["updated"] = uri, updated

        t0 = time.monotonic()
        with anyio.move_on_after(0.3) as scope:
            await client.call_tool("fx:slow", {"ms": 30000})
        out["cancelled"] = scope.cancelled_caught
        out["cancelMs"] = round((time.monotonic() - t0) * 1000)
        # The fixture lists the request ids it was told were cancelled: the hub passed it on.
        for _ in range(250):
            out["upstreamCancelled"] = json.loads(text(await client.call_tool("fx:cancelled", {})) or "[]")
            if out["upstreamCancelled"]:
                break
            await anyio.sleep(0.02)
        out["after"] = dump(await client.call_tool("fx:echo", {"message": "py still served"}))
    print(json.dumps(out))


asyncio.run(main())
