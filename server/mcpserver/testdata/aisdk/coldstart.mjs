// Connects the Vercel AI SDK's MCP client (createMCPClient with its stdio
// transport, as its documentation shows) to a freshly launched connhost mcp
// RUNS times, each on a new data directory and an empty cache directory, so
// that every start compiles the connectors while the client connects. Each
// run lists the tools; the first also calls noop_echo through the AI SDK
// tool's execute, as generateText would. Prints one JSON report on stdout.
//
//   node coldstart.mjs RUNS BASE_DIR CONNHOST_BINARY ARG...
//
// An ARG "{data}" is replaced by the run's data directory.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createMCPClient } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';

const [runsArg, base, command, ...args] = process.argv.slice(2);
const report = { runs: [], call: null };

for (let i = 0; i < Number(runsArg); i++) {
  const data = join(base, `data-${i}`);
  const cache = join(base, `cache-${i}`);
  mkdirSync(cache, { recursive: true });
  const run = { ok: false, tools: [], protocol: null, ms: 0, error: null, uncaught: [] };
  const started = Date.now();
  let client;
  try {
    const transport = new Experimental_StdioMCPTransport({
      command,
      args: args.map((a) => (a === '{data}' ? data : a)),
      // Only the cache directory: the transport passes HOME, PATH and a
      // few more, never the caller's whole environment.
      env: { XDG_CACHE_HOME: cache },
    });
    client = await createMCPClient({
      transport,
      onUncaughtError: (e) => run.uncaught.push(String(e?.message ?? e)),
    });
    run.protocol = client.initializeResult?.protocolVersion ?? null;
    const tools = await client.tools();
    run.tools = Object.keys(tools).sort();
    run.ms = Date.now() - started;
    if (i === 0) {
      report.call = await tools.noop_echo.execute({ msg: 'hi' }, { toolCallId: 'call_1', messages: [] });
    }
    run.ok = true;
  } catch (e) {
    run.error = String(e?.stack ?? e);
  } finally {
    try {
      await client?.close();
    } catch (e) {
      run.uncaught.push('close: ' + String(e?.message ?? e));
    }
  }
  report.runs.push(run);
}
process.stdout.write(JSON.stringify(report) + '\n');
