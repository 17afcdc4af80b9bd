// The TypeScript SDK v1 client (@modelcontextprotocol/sdk) against the HTTP face of a hub
// whose tools are searched; prints what it saw as one JSON object.
//
//   node client.mjs URL PEERS_DIR MODE [SDK ERA]
//
// MODE search: list, search_tools, then call_tool of the fixture's echo (the permission
// prompt answered "once" through elicitation), of progress (answered "once", with an
// onprogress handler), and of echo again (answered "deny").
// MODE profile: what a profile's endpoint shows: its list and, when it searches, a search
// and call_tool of a tool in the profile and of one outside it.
// SDK: v1 (@modelcontextprotocol/sdk, the default) or v2 (@modelcontextprotocol/client).
// ERA: legacy (the default), or 2026-07-28 (v2 only: pinned, stateless; the prompt comes as
// an input-required result that the SDK fulfils through the same handler).
//
// The SDKs are resolved from PEERS_DIR through createRequire (both ship CommonJS builds), so
// this file may live outside it.
import { createRequire } from "node:module";

const [url, peersDir, mode, sdk = "v1", era = "legacy"] = process.argv.slice(2);
const require = createRequire(peersDir + "/package.json");
const modern = era !== "legacy";
const answers = [{ decision: "once" }, { decision: "once" }, { decision: "deny" }];
const asked = [];
const answer = async (req) => {
  asked.push(req.params ?? req);
  const content = answers.shift();
  return content ? { action: "accept", content } : { action: "cancel" };
};
const info = { name: `ts-${sdk}-search`, version: "0" };
const capabilities = { elicitation: { form: {} } };
let client, transport, call;
if (sdk === "v1") {
  const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const types = require("@modelcontextprotocol/sdk/types.js");
  client = new Client(info, { capabilities });
  client.setRequestHandler(types.ElicitRequestSchema, answer);
  transport = new StreamableHTTPClientTransport(new URL(url));
  call = (name, args, options) =>
    client.callTool({ name, arguments: args }, types.CallToolResultSchema, { timeout: 60000, ...options });
} else {
  const { Client, StreamableHTTPClientTransport } = require("@modelcontextprotocol/client");
  client = new Client(info, {
    capabilities,
    versionNegotiation: { mode: modern ? { pin: era } : "legacy" },
  });
  client.setRequestHandler("elicitation/create", answer);
  transport = new StreamableHTTPClientTransport(new URL(url));
  call = (name, args, options) => client.callTool({ name, arguments: args }, { timeout: 60000, ...options });
}
// A call that may be refused with a JSON-RPC error: the result, or the error's message.
const attempt = async (name, args) => {
  try {
    return await call(name, args);
  } catch (e) {
    return { thrown: String(e?.message ?? e), code: e?.code ?? null };
  }
};

await client.connect(transport);
const out = { mode, sdk, era, sessionId: transport.sessionId ?? null };
out.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null;
out.tools = (await client.listTools()).tools;
const names = out.tools.map((t) => t.name);

if (mode === "search") {
  out.search = await call("search_tools", { query: "repeat my message back" });
  out.askedAfterSearch = asked.length;
  const echo = out.search.structuredContent.tools[0].name;
  out.once = await call("call_tool", { name: echo, arguments: { message: "ts reached it" } });
  const progress = [];
  out.progress = await call(
    "call_tool",
    { name: "fx:progress", arguments: { steps: 3, ms: 20 } },
    { onprogress: (p) => progress.push(p) },
  );
  out.progressSeen = progress;
  out.denied = await call("call_tool", { name: echo, arguments: { message: "ts refused" } });
  out.asked = asked;
} else if (names.includes("search_tools")) {
  out.search = await call("search_tools", { query: "repeat my message back" });
  out.searchFx = await attempt("search_tools", { query: "echo", server: "fx" });
  out.callOther = await attempt("call_tool", { name: "other:echo", arguments: { message: "in the profile" } });
  out.callFx = await attempt("call_tool", { name: "fx:echo", arguments: { message: "outside it" } });
} else {
  out.direct = await attempt("other:echo", { message: "listed in the profile" });
  out.directFx = await attempt("fx:echo", { message: "outside it" });
}

if (!modern) await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
