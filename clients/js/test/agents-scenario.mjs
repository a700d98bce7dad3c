// One run of an @openai/agents agent against connhost, for the Go test
// devkit/testing/runtimes (which starts connhost, kills this process
// mid-call with SIGKILL and counts the charges at the Stripe emulator).
// The model is a scripted Model (no model API is reachable): it asks for
// one tool call, then answers with what the tool said; it counts the
// requests it is sent. Everything between is the runtime's own path: its
// MCP client, its tool execution, its RunState, its interruptions.
//
//   node agents-scenario.mjs '<json>'
//
// The JSON: transport ("stdio": command, args; "http": url, token),
// adapter (true: @connhost/runtimes' connhostTools and runWithConnhost;
// false: the runtime's own mcpServers integration), phase ("first": a new
// run, saved to state at each pause; "resume": restored from state, as a
// restarted process does, and continued), wait (seconds connhost holds a
// gated call), killBeforeSend (SIGKILL this process as its call would be
// sent), session, callId, tool, arguments. It prints one JSON line:
// the tool outputs the model saw, the final output, the model requests
// this process made and the approvals the run paused for.
import { readFileSync, writeFileSync } from 'node:fs';

import { Agent, MCPServerStdio, MCPServerStreamableHttp, run, Usage } from '@openai/agents';

import { connhostTools, restoreRunState, runWithConnhost } from '../openai-agents.js';

const cfg = JSON.parse(process.argv[2]);

const textOf = (o) => (typeof o === 'string' ? o : (o?.text ?? JSON.stringify(o)));

// ScriptedModel asks for cfg.tool (under cfg.callId, as a model API
// names its calls), then ends the turn with the tool's output; told that
// the call did not run, it issues it again under a new id.
class ScriptedModel {
  requests = 0;

  async getResponse(request) {
    this.requests++;
    const items = Array.isArray(request.input) ? request.input : [];
    const last = items.filter((i) => i.type === 'function_call_result').at(-1);
    const ask = (callId) => ({
      usage: new Usage(),
      output: [{ type: 'function_call', callId, name: cfg.tool, arguments: JSON.stringify(cfg.arguments), status: 'completed' }],
    });
    if (!last) return ask(cfg.callId);
    if (last.callId === cfg.callId && /did not run/i.test(textOf(last.output))) return ask(`${cfg.callId}_again`);
    return {
      usage: new Usage(),
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `tool said: ${textOf(last.output)}` }] }],
    };
  }

  async *getStreamedResponse(request) {
    const r = await this.getResponse(request);
    yield { type: 'response_done', response: { id: 'resp_scripted', usage: { requests: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0 }, output: r.output } };
  }
}

// connhost mcp opens its ledger and compiles its connectors before it
// answers initialize: more than the runtime's 5 s default on a busy
// machine. The environment is passed on: the runtime's stdio transport
// does not pass it by itself.
const timeouts = { clientSessionTimeoutSeconds: 300, timeout: 300_000 };
const server = cfg.transport === 'stdio'
  ? new MCPServerStdio({ name: 'connhost', command: cfg.command, args: cfg.args, env: { ...process.env }, ...timeouts })
  : new MCPServerStreamableHttp({ name: 'connhost', url: cfg.url, requestInit: { headers: { Authorization: `Bearer ${cfg.token}` } }, ...timeouts });
await server.connect();

const model = new ScriptedModel();
const instructions = 'Pay what you are asked to.';
let result;
if (cfg.adapter) {
  const tools = await connhostTools(server, { sessionId: cfg.session, ...(cfg.wait ? { wait: cfg.wait } : {}) });
  const agent = new Agent({ name: 'payer', instructions, model, tools });
  const save = (s) => writeFileSync(cfg.state, s);
  if (cfg.killBeforeSend && cfg.phase === 'first') {
    // The process dies as its call would leave it, after the adapter
    // saved the run.
    server.callToolResult = () => process.kill(process.pid, 'SIGKILL');
  }
  if (cfg.phase === 'first') {
    result = await runWithConnhost(agent, 'Pay 500 cents.', { save });
  } else {
    result = await runWithConnhost(agent, await restoreRunState(agent, readFileSync(cfg.state, 'utf8')), { save });
  }
} else {
  const agent = new Agent({ name: 'payer', instructions, model, mcpServers: [server] });
  result = await run(agent, 'Pay 500 cents.');
}
const outputs = result.history.filter((i) => i.type === 'function_call_result').map((i) => textOf(i.output));
process.stdout.write(JSON.stringify({
  outputs,
  final: result.finalOutput ?? null,
  modelCalls: model.requests,
  awaiting: result.awaitingApproval ?? [],
}) + '\n');
await server.close();
process.exit(0);
