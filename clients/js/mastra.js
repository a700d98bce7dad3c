// connhost's MCP tools for Mastra (@mastra/core 1.x agents), with the
// call identity wired through: the session is the memory thread, the
// tool-call id the model's. A call is saved to the thread before it runs;
// a call that awaits a reviewer suspends the run (Mastra's own pause,
// stored with the run's snapshot); resume() continues a thread after a
// restart: unfinished calls are settled with connhost by their original
// ids and their results written into the thread, and suspended runs are
// resumed, so the model is asked again only about calls that never
// reached connhost.
//
//   import { connhostMastra } from '@connhost/runtimes/mastra';
//
//   const connhost = await connhostMastra({ command: 'connhost', args: ['mcp', '--config', cfg] });
//   const agent = new Agent({ id: 'payer', name: 'payer', instructions, model, memory, tools: connhost.tools });
//   // after a restart, or once a reviewer has decided:
//   const { output } = await connhost.resume(agent, { thread, resource });
//
// Use these tools instead of @mastra/mcp's MCPClient tools for connhost
// (which pass no ids, and hand the model only the structured content).
import { createTool } from '@mastra/core/tools';

import { callConnhost, checkSettled, connect, listTools, modelView, objectSchema } from './call.js';

/**
 * connhostMastra connects to connhost and returns its tools for a Mastra
 * agent, with resume() for a thread whose run was interrupted.
 *
 * @param {import('./mastra.js').Target} target
 * @param {import('./mastra.js').MastraOptions} [options]
 */
export async function connhostMastra(target, options = {}) {
  const { sessionId, namespace, wait, timeoutMs } = options;
  const { client, owned } = await connect(target, 'connhost-mastra');
  const listed = await listTools(client);
  const names = new Set(listed.map((t) => t.name));

  const sessionOf = (ctx) => {
    const s = typeof sessionId === 'function' ? sessionId(ctx) : sessionId;
    // The memory thread: the conversation a resumed run continues. A run
    // without memory has only its run id, which a resumed suspended run
    // keeps.
    return s ?? ctx?.agent?.threadId ?? (ctx?.runId ? `run-${ctx.runId}` : undefined);
  };

  const tools = {};
  for (const t of listed) {
    tools[t.name] = createTool({
      id: t.name,
      description: t.description ?? '',
      inputSchema: objectSchema(t.inputSchema),
      // What a run suspended on a connhost approval holds, and what
      // resume() hands back.
      suspendSchema: {
        type: 'object',
        properties: {
          connhost: { type: 'string' },
          approval_id: { type: 'string' },
          execution_id: { type: 'string' },
          text: { type: 'string' },
        },
        additionalProperties: true,
      },
      resumeSchema: { type: 'object', properties: { wait: { type: 'number' } }, additionalProperties: true },
      execute: async (input, ctx) => {
        const a = ctx?.agent;
        const toolCallId = a?.toolCallId;
        if (!toolCallId) {
          throw new Error(`connhost: ${t.name} ran outside an agent's tool call (no context.agent.toolCallId), so it has no stable identity`);
        }
        const session = sessionOf(ctx);
        if (!session) {
          throw new Error(`connhost: ${t.name} has no session: give the agent memory and run it with { memory: { thread, resource } }, or pass options.sessionId`);
        }
        const resumed = a.resumeData !== undefined && a.resumeData !== null;
        if (!resumed) {
          // Mastra saves the thread's messages in batches; the tool call
          // must be stored before it runs, so that a process killed while
          // it runs is resumed with it.
          await a.flushMessages?.();
        }
        const out = await callConnhost(client, {
          tool: t.name, args: input ?? {}, sessionId: session, toolCallId, namespace,
          // A suspended call was sent before it suspended: settle it.
          settle: resumed,
          wait: resumed && typeof a.resumeData.wait === 'number' ? a.resumeData.wait : wait,
          signal: ctx?.abortSignal, timeoutMs,
        });
        // Mastra's own pause: the run's snapshot is stored, and
        // listSuspendedRuns finds it after a restart. A call whose answer
        // did not arrive suspends too (resume() settles it), and so does a
        // resumed call connhost refused to settle: answered, either would
        // end for the run while connhost still holds it.
        const hold = out.status === 'awaiting_approval' || out.status === 'unknown' || (resumed && out.status === 'refused');
        if (hold && typeof a.suspend === 'function') {
          return await a.suspend({
            connhost: out.status,
            ...(out.approval ? { approval_id: out.approval.id } : {}),
            ...(out.executionId ? { execution_id: out.executionId } : {}),
            text: out.text,
          });
        }
        // Mastra shows the model the returned object: the status and the
        // text of what it may do are in it.
        return modelView(out);
      },
    });
  }

  /**
   * resume continues a thread whose run was interrupted (the process
   * was killed, or a call suspended for a reviewer). Calls of these tools
   * that the thread holds without a result are settled with connhost by
   * their original ids and their answers written into the thread as
   * their results; runs suspended on a connhost approval are resumed (the
   * same call is settled: an approved one runs now, once). Then the run
   * continues: the resumed run, or agent.generate over the thread when
   * results were written. A call that still awaits a reviewer stays
   * suspended (or, if the process was killed before it suspended,
   * unanswered) and is listed in pending; output is then undefined or the
   * run suspended again. A call connhost refuses to settle, or whose answer
   * does not arrive, throws, and the thread is left as it was.
   *
   * @param {import('@mastra/core/agent').Agent} agent
   * @param {{thread: string | {id: string}, resource: string}} memory
   * @param {{wait?: number} & Record<string, unknown>} [opts] wait: seconds to hold each undecided
   *   call for a reviewer; the rest is passed to generate / resumeGenerate
   */
  const resume = async (agent, memory, opts = {}) => {
    const { wait: w, ...runOptions } = opts;
    const threadId = typeof memory?.thread === 'string' ? memory.thread : memory?.thread?.id;
    const resourceId = memory?.resource;
    if (!threadId || !resourceId) {
      throw new TypeError('connhostMastra.resume: pass the thread to continue as { thread, resource }');
    }
    const suspended = [];
    const held = new Set();
    const { runs } = await agent.listSuspendedRuns({ threadId, resourceId });
    for (const run of runs ?? []) {
      for (const tc of run.toolCalls ?? []) {
        if (!names.has(tc.toolName)) continue;
        held.add(tc.toolCallId);
        suspended.push({ runId: run.runId, toolCallId: tc.toolCallId, toolName: tc.toolName });
      }
    }

    const mem = await agent.getMemory();
    if (!mem) throw new Error('connhostMastra.resume: the agent has no memory to resume a thread from');
    const { messages } = await mem.recall({ threadId, resourceId });
    const pending = [];
    const settled = [];
    const updated = [];
    for (const m of messages ?? []) {
      if (m.role !== 'assistant' || !Array.isArray(m.content?.parts)) continue;
      let changed = false;
      const parts = [];
      for (const p of m.content.parts) {
        const inv = p.type === 'tool-invocation' ? p.toolInvocation : undefined;
        if (!inv || inv.state !== 'call' || !names.has(inv.toolName) || held.has(inv.toolCallId)) {
          parts.push(p);
          continue;
        }
        const out = checkSettled(await callConnhost(client, {
          tool: inv.toolName, args: inv.args ?? {}, sessionId: sessionOf({ agent: { threadId } }),
          toolCallId: inv.toolCallId, namespace, settle: true, wait: w, timeoutMs,
        }), inv.toolName, inv.toolCallId);
        if (out.status === 'awaiting_approval' || out.status === 'pending') {
          // Undecided, or still being finished: no outcome to write yet.
          pending.push({ toolCallId: inv.toolCallId, toolName: inv.toolName, status: out.status, approvalId: out.approval?.id, executionId: out.executionId });
          parts.push(p);
          continue;
        }
        settled.push({ toolCallId: inv.toolCallId, toolName: inv.toolName, status: out.status });
        parts.push({ ...p, toolInvocation: { ...inv, state: 'result', result: modelView(out) } });
        changed = true;
      }
      if (changed) updated.push({ id: m.id, content: { ...m.content, parts } });
    }
    if (updated.length > 0) await mem.updateMessages({ messages: updated });

    const run = { ...runOptions, memory: { thread: threadId, resource: resourceId } };
    let output;
    if (pending.length > 0) {
      // The thread holds a call that waits for a reviewer: the model must
      // not be asked (Mastra would drop the unanswered call and the model
      // would issue it anew).
      return { output, pending, settled, suspended };
    }
    for (const s of suspended) {
      output = await agent.resumeGenerate(w !== undefined ? { wait: w } : {}, { ...run, runId: s.runId, toolCallId: s.toolCallId });
      if (output?.finishReason === 'suspended') {
        const held = output.suspendPayload?.suspendPayload ?? {};
        if (held.connhost === 'refused' || held.connhost === 'unknown') {
          throw new Error(`connhost: the suspended call ${s.toolName} (tool-call id ${s.toolCallId}) could not be settled, and its run stays suspended: ${held.text}`);
        }
        pending.push({ toolCallId: s.toolCallId, toolName: s.toolName, status: 'awaiting_approval', runId: s.runId, approvalId: held.approval_id });
        return { output, pending, settled, suspended };
      }
    }
    if (suspended.length === 0 && settled.length > 0) {
      output = await agent.generate([], run);
    }
    return { output, pending, settled, suspended };
  };

  return {
    tools,
    resume,
    client,
    close: async () => {
      if (owned) await client.close();
    },
  };
}
