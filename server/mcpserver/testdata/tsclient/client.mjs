// Drives connhost's MCP server with the TypeScript SDK and prints what it
// saw as one JSON object; exits 1 when a shape is not what the MCP
// specification and connhost's documentation promise.
//
//   node client.mjs stdio <command> [args...]
//   node client.mjs http <url> <bearer token>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]), {
    requestInit: { headers: { Authorization: `Bearer ${rest[1]}` } },
  });
} else {
  console.error("usage: client.mjs stdio <command> [args...] | http <url> <token>");
  process.exit(2);
}

const problems = [];
const check = (ok, what) => {
  if (!ok) problems.push(what);
};
const ids = (session, call) => ({ "io.connhost/session_id": session, "io.connhost/tool_call_id": call });

const client = new Client({ name: "connhost-ts-test", version: "0.0.0" });
await client.connect(transport);
const report = { mode, server: client.getServerVersion(), protocolVersion: transport.protocolVersion ?? null };

const { tools } = await client.listTools();
report.tools = tools.map((t) => t.name).sort();
const echo = tools.find((t) => t.name === "noop_echo");
check(echo, "tools/list has noop_echo");
if (echo) {
  report.echoTool = echo;
  check(echo.inputSchema?.type === "object", "noop_echo inputSchema is an object schema");
  check(echo.annotations?.readOnlyHint === true, "noop_echo is read-only");
  check(typeof echo.title === "string" && echo.title.length > 0, "noop_echo has a title");
}

// A read, with the runtime's ids.
const session = `ts-${mode}`;
const read = await client.callTool({ name: "noop_echo", arguments: { msg: "hi" }, _meta: ids(session, "c1") });
report.read = read;
check(!read.isError, "the read is not an error");
check(read.structuredContent?.status === "succeeded", "the read succeeded");
check(read.structuredContent?.identity === "client", "the read's identity came from _meta");
check(/^ex_/.test(read.structuredContent?.execution_id ?? ""), "the read names its execution");
check(read.structuredContent?.result?.msg === "hi", "the read's result is the echo");
check(read.content?.[0]?.type === "text" && read.content[0].text.startsWith("Succeeded"), "the read has a text for the model");
const again = await client.callTool({ name: "noop_echo", arguments: { msg: "hi" }, _meta: ids(session, "c1") });
check(again.structuredContent?.recorded === true, "the same ids return the recorded outcome");
check(again.structuredContent?.execution_id === read.structuredContent?.execution_id, "the same ids name the same execution");

// A gated call waits for a human: an answer, not an error.
const gated = await client.callTool({ name: "gated_echo", arguments: { msg: "x" }, _meta: ids(session, "c2") });
report.gated = gated;
check(!gated.isError, "awaiting_approval is not an error");
check(gated.structuredContent?.status === "awaiting_approval", "the gated call awaits approval");
check(/^ap_/.test(gated.structuredContent?.approval?.id ?? ""), "the gated call names its approval");

// Other arguments under the same ids: isError with the problem code.
const mismatch = await client.callTool({ name: "noop_echo", arguments: { msg: "other" }, _meta: ids(session, "c1") });
report.mismatch = mismatch;
check(mismatch.isError === true, "an intent mismatch is an error result");
check(mismatch.structuredContent?.code === "intent_mismatch", "the mismatch carries its problem code");

// An unknown tool is a protocol problem.
try {
  const unknown = await client.callTool({ name: "nope_nothing", arguments: {} });
  report.unknown = unknown;
  check(unknown.isError === true, "an unknown tool is refused");
} catch (e) {
  report.unknown = { protocolError: String(e.message ?? e) };
}

await client.close();
report.problems = problems;
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(problems.length ? 1 : 0);
