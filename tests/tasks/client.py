"""The Python SDK client (`mcp` 2.3) running tool calls as 2025-11-25 tasks over Streamable
HTTP; prints what it saw as one JSON object.

    python client.py URL PLAN

The SDK has the task types but no task helper, so the requests are its own typed ones sent
through `ClientSession.send_request` (the task-augmented call through its dispatcher): a task-augmented `tools/call`, `tasks/get` polled at
the task's `pollInterval`, `tasks/result` (which blocks, and during which the server's
elicitation reaches the callback here), `tasks/list` and `tasks/cancel`. PLAN is the JSON of
tests/tasks/client.mjs: {"tool", "args"} and {"cancelTool", "cancelArgs"}.
"""

import json
import sys
import time

import anyio
import mcp.types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

TTL = 60000
# Three poll intervals of the hub's (500 ms) and more than server-everything's (1 s).
ANSWER_S = 1.5
TERMINAL = ("completed", "failed", "cancelled")


def dump(r):
    return r.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main():
    url, plan = sys.argv[1], json.loads(sys.argv[2])
    asked = []

    async def on_elicit(context, params):
        asked.append(dump(params))
        # Answered as a person would, not at once: polling must see the task wait for it.
        await anyio.sleep(ANSWER_S)
        schema = params.requested_schema or {}
        answer = {}
        for name, prop in (schema.get("properties") or {}).items():
            choices = prop.get("oneOf") or []
            answer[name] = choices[0]["const"] if choices else "technical"
        return types.ElicitResult(action="accept", content=answer)

    out = {}
    async with Client(url, mode="legacy", read_timeout_seconds=60, elicitation_callback=on_elicit) as client:
        s = client.session

        async def create(name, args):
            # send_request checks a tools/call answer as a CallToolResult, never as the
            # CreateTaskResult a task-augmented call gets; the session's own dispatcher sends
            # the same typed request unchecked, and the answer is checked here instead.
            req = types.CallToolRequest(params=types.CallToolRequestParams(
                name=name, arguments=args, task=types.TaskMetadata(ttl=TTL)))
            data = req.model_dump(by_alias=True, mode="json", exclude_none=True)
            raw = await s._dispatcher.send_raw_request(data["method"], data["params"], {"timeout": 60})
            return types.CreateTaskResult.model_validate(raw, by_name=False)

        async def get(task_id):
            return await s.send_request(
                types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult)

        async def result(task_id):
            return await s.send_request(
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
                types.CallToolResult, request_read_timeout_seconds=60)

        out["protocolVersion"] = s.protocol_version
        tools = (await client.list_tools()).tools
        out["taskSupport"] = {t.name: (t.execution.task_support if t.execution else None) for t in tools}

        if plan.get("tool"):
            created = await create(plan["tool"], plan.get("args") or {})
            out["created"] = dump(created.task)
            task_id, statuses = created.task.task_id, []
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60:
                task = await get(task_id)
                statuses.append({"status": task.status, "statusMessage": task.status_message})
                if task.status in TERMINAL or task.status == "input_required":
                    break
                await anyio.sleep((task.poll_interval or 500) / 1000)
            # tasks/result blocks to the end, delivering the input request on the way.
            out["result"] = dump(await result(task_id))
            out["statuses"] = statuses
            out["afterGet"] = dump(await get(task_id))

        if plan.get("cancelTool"):
            created = await create(plan["cancelTool"], plan.get("cancelArgs") or {})
            task_id = created.task.task_id
            out["cancelCreated"] = dump(created)
            await anyio.sleep(0.3)
            listed = await s.send_request(types.ListTasksRequest(), types.ListTasksResult)
            out["listed"] = [t.task_id for t in listed.tasks]
            try:
                out["cancelAnswer"] = dump(await s.send_request(
                    types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
                    types.CancelTaskResult))
            except MCPError as e:
                out["cancelAnswer"] = {"error": {"code": e.code, "message": e.message}}
            for _ in range(50):
                task = await get(task_id)
                if task.status in TERMINAL:
                    break
                await anyio.sleep(0.1)
            out["cancelGet"] = dump(task)

    out["asked"] = asked
    print(json.dumps(out))


anyio.run(main)
