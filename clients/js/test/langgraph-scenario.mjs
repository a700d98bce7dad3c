// One run of a LangGraph agent against connhost, for the Go test
// internal/devkit/testing/runtimes (which starts connhost, kills this process
// mid-call with SIGKILL and counts the charges at the Stripe emulator).
// The model is LangChain's FakeListChatModel bound to the tools (no model
// API is reachable): it answers with one tool call, then with what the
// tool said. The graph is the usual agent loop (model → ToolNode → model)
// with a SQLite checkpointer on disk, so a restarted process resumes the
// thread where the last checkpoint left it.
//
//   node langgraph-scenario.mjs '<json>'
//
// The JSON: transport ("stdio": command, args; "http": url, token),
// adapter (true: @connhost/runtimes' loadConnhostTools; false:
// @langchain/mcp-adapters' loadMcpTools), phase ("first": a new thread;
// "resume": continue the thread from its last checkpoint, as a restarted
// process does; "replay": run the thread again from the checkpoint before
// its tool call), db, thread, callId, tool, arguments. It prints one JSON
// line: the tool outputs the model saw and the last message.
import { AIMessage, ToolMessage } from '@langchain/core/messages';
import { FakeListChatModel } from '@langchain/core/utils/testing';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { loadMcpTools } from '@langchain/mcp-adapters';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { loadConnhostTools } from '../langchain.js';

const cfg = JSON.parse(process.argv[2]);

const client = new Client({ name: 'langgraph-scenario', version: '0.0.0' });
await client.connect(cfg.transport === 'stdio'
  ? new StdioClientTransport({ command: cfg.command, args: cfg.args, stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(cfg.url), { requestInit: { headers: { Authorization: `Bearer ${cfg.token}` } } }));
const tools = cfg.adapter ? await loadConnhostTools(client) : await loadMcpTools('connhost', client);

const callMsg = { content: '', tool_calls: [{ id: cfg.callId, name: cfg.tool, args: cfg.arguments, type: 'tool_call' }] };
const answer = (text) => ({ content: `tool said: ${text}` });

// The model's script: a tool call first, unless the thread already holds
// its result (a resumed or replayed thread starts at the tool node).
const model = new FakeListChatModel({ responses: [callMsg] }).bindTools(tools);
const callModel = async (state) => {
  const last = state.messages.at(-1);
  if (ToolMessage.isInstance(last)) {
    return { messages: [new AIMessage(answer(typeof last.content === 'string' ? last.content : JSON.stringify(last.content)))] };
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
} else if (cfg.phase === 'resume') {
  out = await graph.invoke(null, config);
} else {
  // Replay: the checkpoint whose next step is the tool node.
  let before;
  for await (const snap of graph.getStateHistory(config)) {
    if (snap.next?.includes('tools')) {
      before = snap;
      break;
    }
  }
  if (!before) throw new Error('no checkpoint before the tool node');
  out = await graph.invoke(null, before.config);
}
// What the model read of each tool result: its text.
const textOf = (content) => (typeof content === 'string'
  ? content
  : content.map((b) => (typeof b === 'string' ? b : (b.text ?? JSON.stringify(b)))).join('\n'));
const outputs = out.messages.filter((m) => ToolMessage.isInstance(m)).map((m) => textOf(m.content));
process.stdout.write(JSON.stringify({ outputs, final: String(out.messages.at(-1)?.content ?? '') }) + '\n');
await client.close();
process.exit(0);
