// One run of a Mastra (@mastra/core 1.71) agent against connhost, for the
// Go test devkit/testing/runtimes (which starts connhost, kills this
// process mid-call with SIGKILL, approves or rejects through the API and
// counts the charges at the Stripe emulator). The agent has memory in a
// libSQL file (threads, messages, and the snapshots of suspended runs), as
// Mastra's documentation sets it up for state that survives a restart. The
// model is the AI SDK's MockLanguageModelV3 with a script (no model API is
// reachable): asked without a result for its call, it issues one
// (cfg.callId the first time in the first phase, a new id each other
// time, as a model API does); shown a result, it answers with it.
//
//   node mastra-scenario.mjs '<json>'
//
// The JSON: transport ("stdio": command, args; "http": url, token),
// adapter (true: @connhost/runtimes/mastra; false: @mastra/mcp's
// MCPClient tools), phase ("first": a new thread; "resume": the thread
// continued after a restart with the adapter's resume), state (the libSQL
// file), thread, callId, tool, arguments, wait, crashAfterSave (SIGKILL
// itself once the thread holds a call, before it reaches connhost). It
// prints one JSON line:
// the tool outputs the model saw, its final answer, how many requests it
// got, the tool-call ids it issued, and the calls left for a reviewer.
import { Mastra } from '@mastra/core';
import { Agent } from '@mastra/core/agent';
import { LibSQLStore } from '@mastra/libsql';
import { MCPClient } from '@mastra/mcp';
import { Memory } from '@mastra/memory';
import { MockLanguageModelV3 } from 'ai/test';

import { connhostMastra } from '../mastra.js';

const cfg = JSON.parse(process.argv[2]);

const outputs = [];
const issued = [];
let requests = 0;
// @mastra/mcp names a server's tools <server>_<tool>.
const toolName = cfg.adapter ? cfg.tool : `connhost_${cfg.tool}`;

// What the model reads of a tool result in its prompt.
const textOf = (output) => {
  switch (output?.type) {
    case 'text':
    case 'error-text':
      return output.value;
    case 'execution-denied':
      return `denied: ${output.reason ?? ''}`;
    default:
      return JSON.stringify(output?.value ?? output);
  }
};

const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    requests++;
    const results = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content).filter((p) => p.type === 'tool-result');
    const last = results.at(-1);
    // Told a call did not run, a model issues it again if it is still
    // wanted: once here.
    const again = last && issued.length === 0 && /did not run/.test(textOf(last.output));
    if (!last || again) {
      // A restarted process's model is a new request to the model API:
      // its call has a new id.
      const id = cfg.phase === 'first' && issued.length === 0 ? cfg.callId : `${cfg.callId}-${cfg.phase}-${issued.length}`;
      issued.push(id);
      return {
        content: [{ type: 'tool-call', toolCallId: id, toolName, input: JSON.stringify(cfg.arguments) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
      };
    }
    for (const r of results) outputs.push(textOf(r.output));
    return {
      content: [{ type: 'text', text: `tool said: ${textOf(last.output)}` }],
      finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [],
    };
  },
});

const target = cfg.transport === 'stdio'
  ? { command: cfg.command, args: cfg.args }
  : { url: cfg.url, token: cfg.token };

const storage = new LibSQLStore({ id: 'scenario', url: `file:${cfg.state}` });
const memory = new Memory({ storage });
if (cfg.crashAfterSave) {
  // The process dies as soon as the thread holds a tool call, before the
  // call reaches connhost.
  const save = memory.saveMessages.bind(memory);
  memory.saveMessages = async (args) => {
    const out = await save(args);
    const calls = (args?.messages ?? []).flatMap((m) => m.content?.parts ?? [])
      .filter((p) => p.type === 'tool-invocation' && p.toolInvocation?.state === 'call');
    if (calls.length > 0) process.kill(process.pid, 'SIGKILL');
    return out;
  };
}
const thread = { thread: cfg.thread, resource: 'customer-1' };

let connhost;
let mcp;
let tools;
if (cfg.adapter) {
  connhost = await connhostMastra(target, { wait: cfg.wait });
  tools = connhost.tools;
} else {
  // Mastra's own MCP integration.
  mcp = new MCPClient({
    servers: { connhost: { url: new URL(cfg.url), requestInit: { headers: { Authorization: `Bearer ${cfg.token}` } } } },
  });
  tools = await mcp.listTools();
}
const agent = new Agent({ id: 'payer', name: 'payer', instructions: 'Pay what you are asked to.', model, memory, tools });
const mastra = new Mastra({ agents: { payer: agent }, storage, logger: false });
const payer = mastra.getAgent('payer');

let output;
let pending = [];
if (cfg.phase === 'first') {
  output = await payer.generate('Pay 500 cents.', { memory: thread, maxSteps: 5 });
} else {
  ({ output, pending } = await connhost.resume(payer, thread, { wait: cfg.wait, maxSteps: 5 }));
}
// The run suspended on a call (Mastra's own pause).
const paused = output?.finishReason === 'suspended' && output.suspendPayload?.toolCallId ? [output.suspendPayload.toolCallId] : [];
const final = output && output.finishReason !== 'suspended' ? output.text : null;
process.stdout.write(JSON.stringify({ outputs, final, modelRequests: requests, issued, pending, paused }) + '\n');
await connhost?.close();
await mcp?.disconnect();
process.exit(0);
