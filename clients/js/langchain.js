// connhost's MCP tools for LangChain and LangGraph, with the call
// identity wired through (the thread id, config.configurable.thread_id,
// as the session; the model's tool-call id, config.toolCall.id), a call
// that awaits a human's approval mapped onto LangGraph's interrupt(), and
// a thread resumed by reconciliation after a crash.
//
//   import { Client } from '@modelcontextprotocol/sdk/client/index.js';
//   import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
//   import { loadConnhostTools, resumeThread } from '@connhost/runtimes/langchain';
//
//   const client = new Client({ name: 'my-agent', version: '1.0.0' });
//   await client.connect(new StdioClientTransport({ command: 'connhost', args: ['mcp', '--config', 'connhost.toml'], env: { ...process.env } }));
//   const tools = await loadConnhostTools(client);
//   // bind them to the model and hand them to a ToolNode; compile the
//   // graph with a checkpointer and run it with { configurable: { thread_id } }.
//   // After a restart, or once a reviewer decided:
//   const out = await resumeThread(graph, config, tools);
//
// Use these tools instead of @langchain/mcp-adapters' loadMcpTools for
// connhost (which sends {name, arguments} only). A MultiServerMCPClient's
// connection works too: loadConnhostTools(await mcp.getClient('connhost')).
import { ToolMessage } from '@langchain/core/messages';
import { DynamicStructuredTool } from '@langchain/core/tools';

import { callStatus, identityMeta, resultText, unknownOutcome, unsettled } from './index.js';

// How each connhost tool reaches connhost: tool → {client, name, options}.
const connhostOf = new WeakMap();

/**
 * loadConnhostTools lists the tools of a connected MCP client (an
 * @modelcontextprotocol/sdk Client) talking to connhost, as LangChain
 * tools that pass the call identity. The model's tool-call id comes from
 * the ToolCall the tool is invoked with (LangGraph's ToolNode does that);
 * the session from options.sessionId, else the thread id of the run
 * (config.configurable.thread_id), the same when a checkpointer resumes
 * the thread.
 *
 * In a LangGraph graph with a checkpointer, a call that awaits a human's
 * approval (after options.wait, if set), or that connhost is still
 * finishing (pending), pauses the graph with interrupt():
 * the result holds __interrupt__ with the approval to decide, and the
 * thread's checkpoint holds the call. resumeThread goes on once it is
 * decided: the same call id is settled and an approved call runs, once,
 * with no new model request.
 *
 * @param {import('@modelcontextprotocol/sdk/client/index.js').Client} client connected
 * @param {{sessionId?: string | ((config: object) => string), namespace?: string, timeoutMs?: number, wait?: number}} [options]
 *   wait: seconds connhost holds a call that awaits approval until a
 *   reviewer decides (io.connhost/wait); timeoutMs must be longer.
 * @returns {Promise<DynamicStructuredTool[]>}
 */
export async function loadConnhostTools(client, options = {}) {
  const listed = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    listed.push(...(page.tools ?? []));
    cursor = page.nextCursor;
  } while (cursor);
  return listed.map((t) => {
    const ct = new DynamicStructuredTool({
      name: t.name,
      description: t.description ?? '',
      schema: { ...(t.inputSchema ?? {}), type: 'object', properties: t.inputSchema?.properties ?? {} },
      metadata: { annotations: t.annotations },
      func: async (args, _runManager, config) => {
        const toolCallId = config?.toolCall?.id;
        if (!toolCallId) {
          throw new Error(`connhost: ${t.name} was invoked without a tool call (config.toolCall.id): invoke it with the model's ToolCall, as ToolNode does`);
        }
        const call = { id: toolCallId, name: t.name, args };
        // Throws, having sent nothing, if the thread never saves it.
        await awaitSaved(config, toolCallId);
        let result;
        try {
          result = await callConnhost(ct, config, call, {});
          for (;;) {
            const waiting = unsettled(result);
            if (!waiting || !inGraph(config)) break;
            // Pauses the graph here (for a human's decision, or until
            // connhost finishes the call); returns when it is resumed.
            const { interrupt } = await import('@langchain/langgraph');
            interrupt({ connhost: waiting.status, tool: t.name, ...waiting, text: resultText(result) });
            result = await callConnhost(ct, config, call, { settle: true });
          }
        } catch (error) {
          if (isGraphInterrupt(error) || config?.signal?.aborted) throw error;
          // Not "Please fix your mistakes": a new call would be a new
          // execution.
          return unknownOutcome(t.name, error);
        }
        return resultText(result);
      },
    });
    connhostOf.set(ct, { client, name: t.name, options });
    return ct;
  });
}

// inGraph reports whether a tool runs in a LangGraph graph that can pause
// (one with a checkpointer).
function inGraph(config) {
  return Boolean(config?.configurable?.__pregel_checkpointer);
}

// isGraphInterrupt is LangGraph's test of the error interrupt() throws.
function isGraphInterrupt(error) {
  return error?.name === 'GraphInterrupt' || error?.name === 'NodeInterrupt';
}

// savedWithin is how long a call waits for the checkpoint that holds it:
// LangGraph's default durability ("async") writes a step's checkpoint
// while the next step runs.
const savedWithin = 30_000;

// awaitSaved returns once the thread's latest checkpoint holds the tool
// call toolCallId, so that a restart finds the call (resumeThread) if the
// process dies after it is sent. Outside a graph with a checkpointer
// there is nothing to wait for.
async function awaitSaved(config, toolCallId) {
  const c = config?.configurable;
  const saver = c?.__pregel_checkpointer;
  if (!saver || typeof saver.getTuple !== 'function' || c.thread_id === undefined) return;
  // The tool node's namespace is "tools:<task id>" under its graph's.
  const ns = String(c.checkpoint_ns ?? '').split('|').slice(0, -1).join('|');
  const deadline = Date.now() + savedWithin;
  for (let pause = 5; ; pause = Math.min(pause * 2, 200)) {
    const tuple = await saver.getTuple({ configurable: { thread_id: c.thread_id, checkpoint_ns: ns } });
    if (holdsCall(tuple?.checkpoint?.channel_values, toolCallId)) return;
    if (Date.now() > deadline) {
      throw new Error(`connhost: the thread's checkpoint does not hold tool call ${toolCallId}, so a restart could not settle it; nothing was sent. Run the graph with durability "sync" or "async", not "exit"`);
    }
    await new Promise((r) => setTimeout(r, pause));
  }
}

function holdsCall(values, toolCallId) {
  for (const v of Object.values(values ?? {})) {
    if (Array.isArray(v) && v.some((m) => (m?.tool_calls ?? m?.kwargs?.tool_calls)?.some?.((tc) => tc?.id === toolCallId))) return true;
  }
  return false;
}

// callConnhost sends one call ({id, name, args}) of tool ct.
async function callConnhost(ct, config, call, { settle }) {
  const { client, name, options } = connhostOf.get(ct);
  let session = typeof options.sessionId === 'function' ? options.sessionId(config) : options.sessionId;
  session ??= config?.configurable?.thread_id;
  if (session === undefined) {
    throw new Error(`connhost: ${name} has no session: run the graph with { configurable: { thread_id } }, or pass options.sessionId`);
  }
  const meta = identityMeta({ sessionId: String(session), toolCallId: call.id, namespace: options.namespace, settle, wait: options.wait });
  return client.callTool({ name, arguments: call.args ?? {}, _meta: meta }, undefined, {
    ...(config?.signal ? { signal: config.signal } : {}),
    ...(options.timeoutMs ? { timeout: options.timeoutMs } : {}),
  });
}

/**
 * resumeThread continues a LangGraph thread that uses connhost's tools:
 * after a restart (from the thread's checkpoint), or once a reviewer
 * decided a call the thread paused for. Before the model is asked
 * anything, it settles each connhost tool call in the thread's messages
 * that has no ToolMessage, by its original ids (io.connhost/settle): a
 * call that reached connhost answers its recorded outcome (approved
 * meanwhile, it runs now, once); one that never did answers that it did
 * not run, and only then may the model issue it again. The answers are
 * written into the thread as the tool node's ToolMessages
 * (graph.updateState), and the graph goes on (graph.invoke(null, config)).
 * While a call still awaits a human, or connhost is still finishing it,
 * the thread stays paused (the result holds __interrupt__). A saved call
 * connhost refuses to settle (nothing was done) throws, and the thread is
 * left as it was.
 *
 * @param {object} graph a compiled graph with a checkpointer
 * @param {{configurable: {thread_id: string}}} config
 * @param {DynamicStructuredTool[]} tools what loadConnhostTools returned (other tools are left to the graph)
 * @param {{messagesKey?: string, asNode?: string}} [options]
 *   messagesKey: the state's messages channel (default "messages");
 *   asNode: the tool node to write the answers as (default: the node the
 *   thread would run next).
 * @returns {Promise<unknown>} what graph.invoke returns
 */
export async function resumeThread(graph, config, tools, options = {}) {
  const key = options.messagesKey ?? 'messages';
  const snap = await graph.getState(config);
  const messages = snap?.values?.[key] ?? [];
  const answered = new Set(messages.filter((m) => ToolMessage.isInstance(m)).map((m) => m.tool_call_id));
  const byName = new Map(tools.filter((t) => connhostOf.has(t)).map((t) => [t.name, t]));
  const open = messages.flatMap((m) => m.tool_calls ?? []).filter((tc) => tc.id && !answered.has(tc.id));
  const ours = open.filter((tc) => byName.has(tc.name));
  if (ours.length === 0 || ours.length < open.length) {
    // Nothing of connhost's to settle, or calls of other tools the
    // graph's tool node runs again itself.
    return graph.invoke(null, config);
  }
  const callConfig = { ...config, configurable: { ...config.configurable } };
  const results = await Promise.all(ours.map((tc) => callConnhost(byName.get(tc.name), callConfig, tc, { settle: true })));
  results.forEach((r, i) => {
    if (callStatus(r) === 'refused') {
      // Nothing was done, and the call is not settled: written in as its
      // result it would end the call for the thread while connhost still
      // holds it. The thread stays as it was.
      throw new Error(`connhost: the saved call ${ours[i].name} (tool-call id ${ours[i].id}) could not be settled, and the thread was left as it was: ${resultText(r)}`);
    }
  });
  if (results.some((r) => unsettled(r))) {
    // Still undecided, or still being finished: the tool node runs again
    // and pauses the thread.
    return graph.invoke(null, config);
  }
  const asNode = options.asNode ?? (snap.next?.length === 1 ? snap.next[0] : undefined);
  if (asNode === undefined) {
    throw new Error(`connhost: resumeThread cannot tell which node writes the tool results (the thread would run ${JSON.stringify(snap.next)} next): pass options.asNode`);
  }
  const toolMessages = ours.map((tc, i) => new ToolMessage({
    content: resultText(results[i]),
    tool_call_id: tc.id,
    name: tc.name,
    status: results[i]?.isError ? 'error' : 'success',
  }));
  await graph.updateState(config, { [key]: toolMessages }, asNode);
  return graph.invoke(null, config);
}
