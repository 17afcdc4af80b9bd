// The TypeScript SDK v1 client (@modelcontextprotocol/sdk, the one with the 2025-11-25 task
// API: client.experimental.tasks) running tool calls as tasks over Streamable HTTP; prints
// what it saw as one JSON object.
//
//   node client.mjs URL PEERS_DIR PLAN
//
// PLAN (JSON): {"tool", "args"}: the call run as a task with callToolStream (status polling
// with tasks/get; on input_required, tasks/result, which delivers the server's elicitation,
// answered here); {"cancelTool", "cancelArgs"}: a second task, listed with tasks/list then
// cancelled; {"isolation": true}: a second client (its own session) creates a task, and the
// first tries to see, read and cancel it. The SDK is resolved from PEERS_DIR through
// createRequire, so this file may live outside it.
import { createRequire } from "node:module";

const [url, peersDir, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const require = createRequire(peersDir + "/package.json");
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const types = require("@modelcontextprotocol/sdk/types.js");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const TTL = 60000;
// Three poll intervals of the hub's (500 ms) and more than server-everything's (1 s).
const ANSWER_MS = 1500;

const asked = [];
const statusNotes = [];
async function connect(name) {
  const client = new Client(
    { name, version: "0" },
    { capabilities: { elicitation: { form: {} }, tasks: { list: {}, cancel: {} } } },
  );
  client.setRequestHandler(types.ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    // Answered as a person would, not at once: polling must see the task wait for it.
    await sleep(ANSWER_MS);
    // Each field gets its first choice (server-everything's research query offers
    // interpretations of the topic: "programming" for "python").
    const props = Object.entries(req.params.requestedSchema?.properties ?? {});
    return { action: "accept", content: Object.fromEntries(props.map(([k, p]) => [k, p.oneOf?.[0]?.const ?? "technical"])) };
  });
  client.setNotificationHandler(types.TaskStatusNotificationSchema, (n) => statusNotes.push(n.params.status));
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}
const errorOf = (e) => ({ code: e?.code ?? null, message: String(e?.message ?? e) });
// A raw task-augmented tools/call: the CreateTaskResult as the server sent it.
const createTask = (client, name, args) =>
  client.request(
    { method: "tools/call", params: { name, arguments: args, task: { ttl: TTL } } },
    types.CreateTaskResultSchema,
    { timeout: 60000 },
  );

const { client, transport } = await connect("tasks-ts");
const out = { sessionId: transport.sessionId ?? null, serverCapabilities: client.getServerCapabilities() };
const tools = (await client.listTools()).tools;
out.taskSupport = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));

if (plan.tool) {
  const t0 = Date.now();
  const stream = client.experimental.tasks.callToolStream(
    { name: plan.tool, arguments: plan.args ?? {} },
    types.CallToolResultSchema,
    { task: { ttl: TTL }, timeout: 120000 },
  );
  out.statuses = [];
  for await (const m of stream) {
    if (m.type === "taskCreated") out.created = m.task;
    else if (m.type === "taskStatus") out.statuses.push({ status: m.task.status, statusMessage: m.task.statusMessage ?? null });
    else if (m.type === "result") out.result = m.result;
    else if (m.type === "error") out.error = errorOf(m.error);
  }
  out.ms = Date.now() - t0;
  if (out.created) {
    out.afterGet = await client.experimental.tasks.getTask(out.created.taskId);
    // tasks/result again once terminal: the stored answer, without running the call again.
    out.resultAgain = await client.experimental.tasks.getTaskResult(out.created.taskId, types.CallToolResultSchema);
  }
}

if (plan.cancelTool) {
  const created = await createTask(client, plan.cancelTool, plan.cancelArgs ?? {});
  out.cancelCreated = created;
  const id = created.task.taskId;
  await sleep(300);
  out.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
  try {
    out.cancelAnswer = await client.experimental.tasks.cancelTask(id);
  } catch (e) {
    out.cancelAnswer = { error: errorOf(e) };
  }
  for (let i = 0; i < 50; i++) {
    out.cancelGet = await client.experimental.tasks.getTask(id);
    if (["cancelled", "completed", "failed"].includes(out.cancelGet.status)) break;
    await sleep(100);
  }
  try {
    out.cancelResult = await client.experimental.tasks.getTaskResult(id, types.CallToolResultSchema, { timeout: 10000 });
  } catch (e) {
    out.cancelResultError = errorOf(e);
  }
}

if (plan.isolation) {
  const other = await connect("tasks-ts-other");
  out.otherSessionId = other.transport.sessionId ?? null;
  const created = await createTask(other.client, plan.isolation.tool, plan.isolation.args ?? {});
  const id = created.task.taskId;
  out.otherTaskId = id;
  out.otherListed = (await other.client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
  out.mineListed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
  const attempt = async (what, f) => {
    try {
      out[what] = { ok: await f() };
    } catch (e) {
      out[what] = { error: errorOf(e) };
    }
  };
  await attempt("foreignGet", () => client.experimental.tasks.getTask(id));
  await attempt("foreignResult", () => client.experimental.tasks.getTaskResult(id, types.CallToolResultSchema, { timeout: 10000 }));
  await attempt("foreignCancel", () => client.experimental.tasks.cancelTask(id));
  // The owner still has it, untouched by the other's cancel.
  out.ownerGet = await other.client.experimental.tasks.getTask(id);
  await other.client.experimental.tasks.cancelTask(id).catch(() => {});
  await other.client.close();
}

out.asked = asked;
out.statusNotes = statusNotes;
await client.close();
console.log(JSON.stringify(out));
process.exit(0);
