// One run of an @openai/agents agent against connhost, for the Go test
// internal/devkit/testing/runtimes (which starts connhost, kills this process
// mid-call with SIGKILL and counts the charges at the Stripe emulator).
// The model is a scripted Model (no model API is reachable): it asks for
// one tool call, then answers with what the tool said. Everything between
// is the runtime's own path: its MCP client, its tool execution, its
// RunState.
//
//   node agents-scenario.mjs '<json>'
//
// The JSON: transport ("stdio": command, args; "http": url, token),
// adapter (true: @connhost/runtimes' connhostTools; false: the
// runtime's own mcpServers integration), phase ("first": a new run,
// saved at its human-in-the-loop pause to state, then resumed; "resume":
// restored from state, as a restarted process does), session, callId,
// tool, arguments. It prints one JSON line: the tool outputs the model
// saw and the final output.
import { readFileSync, writeFileSync } from 'node:fs';

import { Agent, MCPServerStdio, MCPServerStreamableHttp, run, Usage } from '@openai/agents';

import { connhostTools, restoreRunState } from '../openai-agents.js';

const cfg = JSON.parse(process.argv[2]);

// ScriptedModel asks for cfg.tool once (under cfg.callId, as a model API
// names its calls), then ends the turn with the tool's output.
class ScriptedModel {
  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    const out = items.find((i) => i.type === 'function_call_result' && i.callId === cfg.callId);
    if (!out) {
      return {
        usage: new Usage(),
        output: [{ type: 'function_call', callId: cfg.callId, name: cfg.tool, arguments: JSON.stringify(cfg.arguments), status: 'completed' }],
      };
    }
    const text = typeof out.output === 'string' ? out.output : (out.output?.text ?? JSON.stringify(out.output));
    return {
      usage: new Usage(),
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `tool said: ${text}` }] }],
    };
  }

  async *getStreamedResponse(request) {
    const r = await this.getResponse(request);
    yield { type: 'response_done', response: { id: 'resp_scripted', usage: { requests: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0 }, output: r.output } };
  }
}

// connhost mcp opens its ledger and compiles its connectors before it
// answers initialize: more than the runtime's 5 s default on a busy
// machine.
const timeouts = { clientSessionTimeoutSeconds: 300, timeout: 300_000 };
const server = cfg.transport === 'stdio'
  ? new MCPServerStdio({ name: 'connhost', command: cfg.command, args: cfg.args, ...timeouts })
  : new MCPServerStreamableHttp({ name: 'connhost', url: cfg.url, requestInit: { headers: { Authorization: `Bearer ${cfg.token}` } }, ...timeouts });
await server.connect();

const model = new ScriptedModel();
let agent;
if (cfg.adapter) {
  // The runtime's human-in-the-loop pause is where @openai/agents saves a
  // run before a tool executes (RunState.toString), so the tool asks for
  // it; the run resumes once "the user" confirms.
  const tools = await connhostTools(server, { sessionId: cfg.session, needsApproval: true });
  agent = new Agent({ name: 'payer', instructions: 'Pay what you are asked to.', model, tools });
} else {
  agent = new Agent({ name: 'payer', instructions: 'Pay what you are asked to.', model, mcpServers: [server] });
}

const outputs = [];
const collect = (result) => {
  for (const item of result.newItems ?? []) {
    if (item.type === 'tool_call_output_item') {
      const o = item.output;
      outputs.push(typeof o === 'string' ? o : (o?.text ?? JSON.stringify(o)));
    }
  }
};

let result;
if (!cfg.adapter) {
  result = await run(agent, 'Pay 500 cents.');
} else if (cfg.phase === 'first') {
  const paused = await run(agent, 'Pay 500 cents.');
  writeFileSync(cfg.state, paused.state.toString());
  for (const item of paused.interruptions) paused.state.approve(item);
  process.stderr.write('resuming after the pause\n');
  result = await run(agent, paused.state);
} else {
  const state = await restoreRunState(agent, readFileSync(cfg.state, 'utf8'), { resumed: true });
  for (const item of state.getInterruptions()) state.approve(item);
  result = await run(agent, state);
}
collect(result);
process.stdout.write(JSON.stringify({ outputs, final: result.finalOutput ?? null }) + '\n');
await server.close();
process.exit(0);
