// One run of a Vercel AI SDK (ai 7) conversation against connhost, for
// the Go test devkit/testing/runtimes (which starts connhost, kills
// this process mid-call with SIGKILL, approves or rejects through the API
// and counts the charges at the Stripe emulator). The model is the SDK's
// MockLanguageModelV3 with a script (no model API is reachable): asked
// without a result for its call, it issues one (cfg.callId the first time
// in the first phase, a new id each other time, as a model API does);
// shown a result, it answers with it. Everything between is the SDK's own path:
// generateText's tool loop, needsApproval, the messages the application
// stores after each step.
//
//   node aisdk-scenario.mjs '<json>'
//
// The JSON: transport ("stdio": command, args; "http": url, token),
// adapter (true: @connhost/runtimes/ai-sdk; false: @ai-sdk/mcp's tools),
// phase ("first": a new conversation; "resume": the conversation restored
// from state, reconciled, continued), state (the file the conversation's
// messages are stored in), session, callId, tool, arguments, wait
// (seconds the adapter holds a gated call for a reviewer), crashAfterSave
// (SIGKILL itself once a call is stored, before it reaches connhost). It prints one
// JSON line: the tool outputs the model saw, its final answer, how many
// requests it got, the tool-call ids it issued, and the calls still
// awaiting a reviewer.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

import { createMCPClient } from '@ai-sdk/mcp';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';

import { connhostAiSdk } from '../ai-sdk.js';

const cfg = JSON.parse(process.argv[2]);

const outputs = [];
const issued = [];
let requests = 0;

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
        content: [{ type: 'tool-call', toolCallId: id, toolName: cfg.tool, input: JSON.stringify(cfg.arguments) }],
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

// The application's store: the conversation's ModelMessage[] in a file,
// written whole (and atomically) each time.
const store = {
  load: () => (existsSync(cfg.state) ? JSON.parse(readFileSync(cfg.state, 'utf8')) : []),
  save: async (messages) => {
    writeFileSync(`${cfg.state}.tmp`, JSON.stringify(messages));
    renameSync(`${cfg.state}.tmp`, cfg.state);
    // crashAfterSave: the process dies as soon as a call is stored, before
    // it reaches connhost.
    const last = messages.at(-1);
    if (cfg.crashAfterSave && last?.role === 'assistant' && Array.isArray(last.content) && last.content.some((p) => p.type === 'tool-call')) {
      process.kill(process.pid, 'SIGKILL');
    }
  },
};

const target = cfg.transport === 'stdio'
  ? { command: cfg.command, args: cfg.args }
  : { url: cfg.url, token: cfg.token };

let report;
if (!cfg.adapter) {
  // The SDK's own MCP integration.
  const mcp = await createMCPClient({
    transport: { type: 'http', url: cfg.url, headers: { Authorization: `Bearer ${cfg.token}` } },
  });
  const tools = await mcp.tools();
  const result = await generateText({ model, tools, prompt: 'Pay 500 cents.', stopWhen: stepCountIs(5) });
  report = { final: result.text };
  await mcp.close();
} else {
  // The application's glue: four lines.
  const connhost = await connhostAiSdk(target, { sessionId: cfg.session, save: store.save, wait: cfg.wait });
  let messages = cfg.phase === 'first' ? [{ role: 'user', content: 'Pay 500 cents.' }] : store.load();
  const resumed = cfg.phase === 'first' ? { messages, pending: [] } : await connhost.resume(messages, { wait: cfg.wait });
  messages = resumed.messages;
  let final = null;
  if (resumed.pending.length === 0) {
    await store.save(messages);
    const result = await generateText({
      model, tools: connhost.tools, messages, stopWhen: stepCountIs(5),
      onStepFinish: (step) => store.save([...messages, ...step.response.messages]),
    });
    messages = [...messages, ...result.responseMessages];
    await store.save(messages);
    final = result.text;
  } else {
    await store.save(messages);
  }
  // The calls paused on the SDK's approval request, with no answer yet.
  const answered = new Set(messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((p) => p.type === 'tool-result').map((p) => p.toolCallId));
  const paused = messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))
    .filter((p) => p.type === 'tool-approval-request' && !answered.has(p.toolCallId)).map((p) => p.toolCallId);
  report = { final, pending: resumed.pending, paused };
  await connhost.close();
}
process.stdout.write(JSON.stringify({ outputs, modelRequests: requests, issued, ...report }) + '\n');
process.exit(0);
