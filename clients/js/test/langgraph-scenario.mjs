// One run of a LangGraph agent against connhost, for the Go test
// devkit/testing/runtimes (which starts connhost, kills this process
// mid-call with SIGKILL and counts the charges at the Stripe emulator).
// The model is LangChain's FakeListChatModel bound to the tools (no model
// API is reachable): it answers with one tool call, then with what the
// tool said; the script counts the model requests. The graph is the usual
// agent loop (model → ToolNode → model) with a SQLite checkpointer on
// disk, so a restarted process resumes the thread where the last
// checkpoint left it.
//
//   node langgraph-scenario.mjs '<json>'
//
// The JSON: transport ("stdio": command, args; "http": url, token),
// adapter (true: @connhost/runtimes' loadConnhostTools and resumeThread;
// false: @langchain/mcp-adapters' loadMcpTools), phase ("first": a new
// thread; "resume": go on with the thread from its checkpoint, as a
// restarted process does), wait (seconds connhost holds a gated call),
// killBeforeSend (SIGKILL this process as its call would be sent), db,
// thread, callId, tool, arguments. It prints one JSON line: the tool
// outputs the model saw, the last message, the model requests this
// process made and the approvals the thread paused for.
import { AIMessage, ToolMessage } from '@langchain/core/messages';
import { FakeListChatModel } from '@langchain/core/utils/testing';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { loadMcpTools } from '@langchain/mcp-adapters';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { loadConnhostTools, resumeThread } from '../langchain.js';

const cfg = JSON.parse(process.argv[2]);

// The stdio transport passes only a few variables of the environment by
// itself: pass all of it.
const client = new Client({ name: 'langgraph-scenario', version: '0.0.0' });
await client.connect(cfg.transport === 'stdio'
  ? new StdioClientTransport({ command: cfg.command, args: cfg.args, env: { ...process.env }, stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(cfg.url), { requestInit: { headers: { Authorization: `Bearer ${cfg.token}` } } }));
const tools = cfg.adapter
  ? await loadConnhostTools(client, { timeoutMs: 300_000, ...(cfg.wait ? { wait: cfg.wait } : {}) })
  : await loadMcpTools('connhost', client);

if (cfg.killBeforeSend && cfg.phase === 'first') {
  // The process dies as its call would leave it, after the adapter saw
  // the call in the thread's checkpoint.
  client.callTool = () => process.kill(process.pid, 'SIGKILL');
}

const callMsg = { content: '', tool_calls: [{ id: cfg.callId, name: cfg.tool, args: cfg.arguments, type: 'tool_call' }] };
const answer = (text) => ({ content: `tool said: ${text}` });

// The model's script: a tool call first, then what the tool said; told
// that the call did not run, it issues it again under a new id. Every
// call of the agent node is one model request.
let modelCalls = 0;
const model = new FakeListChatModel({ responses: [callMsg] }).bindTools(tools);
const callModel = async (state) => {
  modelCalls++;
  const last = state.messages.at(-1);
  if (ToolMessage.isInstance(last)) {
    const text = typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
    if (last.tool_call_id === cfg.callId && /did not run/i.test(text)) {
      return { messages: [new AIMessage({ content: '', tool_calls: [{ ...callMsg.tool_calls[0], id: `${cfg.callId}_again` }] })] };
    }
    return { messages: [new AIMessage(answer(text))] };
  }
  return { messages: [await model.invoke(state.messages)] };
};
const route = (state) => (AIMessage.isInstance(state.messages.at(-1)) && state.messages.at(-1).tool_calls?.length ? 'tools' : END);

const checkpointer = SqliteSaver.fromConnString(cfg.db);
const graph = new StateGraph(MessagesAnnotation)
  .addNode('agent', callModel)
  .addNode('tools', new ToolNode(tools))
  .addEdge(START, 'agent')
  .addConditionalEdges('agent', route, ['tools', END])
  .addEdge('tools', 'agent')
  .compile({ checkpointer });

const config = { configurable: { thread_id: cfg.thread } };
let out;
if (cfg.phase === 'first') {
  out = await graph.invoke({ messages: [{ role: 'user', content: 'Pay 500 cents.' }] }, config);
} else if (cfg.adapter) {
  out = await resumeThread(graph, config, tools);
} else {
  // LangGraph's own resume: the thread from its last checkpoint.
  out = await graph.invoke(null, config);
}
// What the model read of each tool result: its text.
const textOf = (content) => (typeof content === 'string'
  ? content
  : content.map((b) => (typeof b === 'string' ? b : (b.text ?? JSON.stringify(b)))).join('\n'));
const outputs = out.messages.filter((m) => ToolMessage.isInstance(m)).map((m) => textOf(m.content));
const awaiting = (out.__interrupt__ ?? []).map((i) => i.value);
process.stdout.write(JSON.stringify({ outputs, final: String(out.messages.at(-1)?.content ?? ''), modelCalls, awaiting }) + '\n');
await client.close();
process.exit(0);
