// A TypeScript SDK client against the hub's HTTP face; prints what it saw as one JSON object.
//
//   node client.mjs URL PEERS_DIR SDK MODE
//
// SDK: v1 (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client). MODE: legacy, or
// 2026-07-28 (v2 only: the pinned revision, stateless). The SDKs are resolved from PEERS_DIR
// through createRequire (both ship CommonJS builds), so this file may live outside it: ESM
// `import` would resolve from this file's folder and ignore NODE_PATH.
import { createRequire } from "node:module";

const [url, peersDir, sdk, mode] = process.argv.slice(2);
const require = createRequire(peersDir + "/package.json");
const modern = mode !== "legacy";
const label = `ts-${sdk}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (r) => r?.content?.[0]?.text ?? "";

const asked = [];
const updated = [];
// The permission prompt: the same handler serves a legacy elicitation/create request and,
// on 2026-07-28, the SDK's fulfilment of an input-required result.
const answer = async (req) => {
  asked.push(req.params ?? req);
  return { action: "accept", content: { decision: "once" } };
};
const onUpdated = (n) => updated.push(n.params.uri);
const info = { name: `${label}-http`, version: "0" };
const capabilities = { elicitation: { form: {} } };

let client, transport, call;
if (sdk === "v1") {
  const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const types = require("@modelcontextprotocol/sdk/types.js");
  client = new Client(info, { capabilities });
  client.setRequestHandler(types.ElicitRequestSchema, answer);
  client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, onUpdated);
  transport = new StreamableHTTPClientTransport(new URL(url));
  call = (name, args, options) =>
    client.callTool({ name, arguments: args }, types.CallToolResultSchema, { timeout: 60000, ...options });
} else {
  const { Client, StreamableHTTPClientTransport } = require("@modelcontextprotocol/client");
  client = new Client(info, {
    capabilities,
    versionNegotiation: { mode: modern ? { pin: mode } : "legacy" },
  });
  client.setRequestHandler("elicitation/create", answer);
  client.setNotificationHandler("notifications/resources/updated", onUpdated);
  transport = new StreamableHTTPClientTransport(new URL(url));
  call = (name, args, options) => client.callTool({ name, arguments: args }, { timeout: 60000, ...options });
}

await client.connect(transport);
const out = { sdk, mode, sessionId: transport.sessionId ?? null, server: client.getServerVersion() ?? null };
out.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null;
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.echo = await call("fx:echo", { message: `${label} over http` });

const progress = [];
out.progress = await call("fx:progress", { steps: 3, ms: 20 }, { onprogress: (p) => progress.push(p) });
out.progressSeen = progress;

if (modern) {
  // The prompt as it comes: an input-required result, left unanswered here. A plain
  // request, as callTool would hold it against add's output schema (SDK 2.4.0).
  out.inputRequired = await client.request(
    { method: "tools/call", params: { name: "fx:add", arguments: { a: 2, b: 3 } } },
    { timeout: 60000, allowInputRequired: true },
  );
}
out.add = await call("fx:add", { a: 2, b: 3 });
out.asked = asked;

if (!modern) {
  // A subscription, by the URI the hub lists; the fixture's touch announces a change.
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  const uri = out.resources.find((u) => u.endsWith("/static/1"));
  await client.subscribeResource({ uri });
  out.touch = await call("fx:touch", { uri });
  for (let i = 0; i < 500 && !updated.includes(uri); i++) await sleep(20);
  out.subscribed = uri;
  out.updated = updated;
}

const abort = new AbortController();
setTimeout(() => abort.abort("the test cancels"), 300);
const t0 = Date.now();
try {
  await call("fx:slow", { ms: 30000 }, { signal: abort.signal });
  out.cancelled = "answered anyway";
} catch (e) {
  out.cancelled = String(e);
}
out.cancelMs = Date.now() - t0;
// The fixture lists the request ids it was told were cancelled: the hub passed it on.
for (let i = 0; i < 250; i++) {
  out.upstreamCancelled = JSON.parse(text(await call("fx:cancelled", {})) || "[]");
  if (out.upstreamCancelled.length) break;
  await sleep(20);
}
out.after = await call("fx:echo", { message: `${label} still served` });
if (!modern) await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
