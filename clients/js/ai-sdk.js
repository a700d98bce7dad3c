// connhost's MCP tools for the Vercel AI SDK (ai 7: generateText,
// streamText, ToolLoopAgent), with the call identity wired through, the
// call saved before it runs, approvals on the SDK's own pause, and a
// resumed conversation reconciled with connhost before the model is asked
// again.
//
//   import { connhostAiSdk } from '@connhost/runtimes/ai-sdk';
//
//   const connhost = await connhostAiSdk({ command: 'connhost', args: ['mcp', '--config', cfg] },
//     { sessionId: chatId, save: (messages) => store.save(chatId, messages) });
//   const { messages } = await connhost.resume(await store.load(chatId));
//   const result = await generateText({ model, tools: connhost.tools, messages, stopWhen: stepCountIs(5) });
//   await store.save(chatId, [...messages, ...result.responseMessages]);
//
// @ai-sdk/mcp's tools send {name, arguments} only; these tools are built
// over an @modelcontextprotocol/sdk Client, which sends _meta.
import { jsonSchema, tool } from 'ai';

import { callConnhost, checkSettled, connect, listTools, modelView, objectSchema } from './call.js';

/**
 * connhostAiSdk connects to connhost and returns its tools for the AI
 * SDK, with resume() for a conversation restored from its saved messages.
 *
 * @param {import('./ai-sdk.js').Target} target a connected @modelcontextprotocol/sdk Client,
 *   {command, args, env} of connhost mcp, or {url, token} of serve's /mcp
 * @param {import('./ai-sdk.js').AiSdkOptions} options
 */
export async function connhostAiSdk(target, options = {}) {
  const { sessionId, save, namespace, wait, timeoutMs } = options;
  if (typeof sessionId !== 'string' || sessionId === '') {
    throw new TypeError('connhostAiSdk: options.sessionId is required: the id of the conversation (a chat id), the same when it is resumed');
  }
  if (typeof save !== 'function') {
    throw new TypeError('connhostAiSdk: options.save is required: the function that stores the conversation\'s ModelMessage[] (as your onStepFinish/onFinish does); a tool call is saved through it before it runs, so that a restarted process finds it');
  }
  const { client, owned } = await connect(target, 'connhost-ai-sdk');
  const listed = await listTools(client);
  const names = new Set(listed.map((t) => t.name));

  const send = (name, args, toolCallId, extra) => callConnhost(client, {
    tool: name, args, sessionId, toolCallId, namespace, timeoutMs, ...extra,
  });

  // What connhost answered a call when the SDK asked whether it needs
  // approval: execute hands it to the SDK without a second request.
  const answered = new Map();
  // The tool calls of each step (keyed by the step's messages), saved
  // together as the step's assistant message.
  const stepCalls = new WeakMap();
  let saving = Promise.resolve();

  // saveFirst stores the conversation as the SDK will send it after this
  // step, with the step's tool calls and no results yet: a process killed
  // while the call runs is restarted with it, and resume() settles it.
  const saveFirst = async (messages, part) => {
    let parts = stepCalls.get(messages);
    if (!parts) {
      parts = [];
      stepCalls.set(messages, parts);
    }
    parts.push(part);
    const snapshot = [...messages, { role: 'assistant', content: [...parts] }];
    const next = saving.catch(() => {}).then(() => save(snapshot));
    saving = next;
    await next;
  };

  // submit sends a call the conversation has not seen answered: saved
  // first unless the messages already hold it.
  const submit = async (name, input, toolCallId, messages, signal) => {
    if (!holdsCall(messages, toolCallId)) {
      await saveFirst(messages ?? [], { type: 'tool-call', toolCallId, toolName: name, input });
    }
    return send(name, input, toolCallId, { wait, signal });
  };

  const tools = {};
  for (const t of listed) {
    tools[t.name] = tool({
      description: t.description ?? '',
      inputSchema: jsonSchema(objectSchema(t.inputSchema)),
      // The SDK asks this before it runs a call. The call goes to connhost
      // here: connhost decides whether a human must approve it, and the
      // SDK's own pause (a tool-approval-request) is where the run waits
      // for that decision.
      needsApproval: async (input, { toolCallId, messages }) => {
        const out = await submit(t.name, input, toolCallId, messages);
        if (out.status === 'unknown') {
          // The answer did not arrive: the run stops here (generateText
          // rejects) instead of telling the model a guess. The stored
          // conversation holds the call without a result, and resume()
          // settles it.
          const err = new Error(`connhost: the answer to ${t.name} (tool-call id ${toolCallId}) did not arrive; the stored conversation holds the call, and resume() settles it: ${out.text}`);
          err.outcome = out;
          throw err;
        }
        if (out.status === 'awaiting_approval') return true;
        answered.set(toolCallId, out);
        return false;
      },
      execute: async (input, { toolCallId, messages, abortSignal }) => {
        let out = answered.get(toolCallId);
        answered.delete(toolCallId);
        // A generateText-level toolApproval replaces needsApproval: then
        // the call goes to connhost here.
        out ??= await submit(t.name, input, toolCallId, messages, abortSignal);
        return modelView(out);
      },
      toModelOutput: ({ output }) => ({ type: 'text', value: output?.text ?? JSON.stringify(output) }),
    });
  }

  /**
   * resume reconciles a conversation restored from its saved messages
   * with connhost before the model is asked again: every call of these
   * tools that has no result is settled by its original ids (the recorded
   * outcome; an approved call runs now, once; a call that never reached
   * connhost is recorded as not run), and its answer is written into the
   * messages as the call's result. A call that still awaits a reviewer
   * stays on the SDK's pause (a tool-approval-request) and is listed in
   * pending, as is one connhost is still finishing: the SDK cannot
   * continue the conversation until they have outcomes. A call connhost
   * refuses to settle, or whose answer does not arrive, throws, and the
   * messages are left as they were.
   *
   * @param {Array<object>} saved the conversation's ModelMessage[]
   * @param {{wait?: number}} [opts] wait: seconds to hold each undecided call for a reviewer
   */
  const resume = async (saved, opts = {}) => {
    const w = opts.wait ?? 0;
    const messages = [...(saved ?? [])];
    const done = new Set();
    const requests = new Map();
    const responded = new Set();
    for (const m of messages) {
      if (!Array.isArray(m?.content)) continue;
      for (const p of m.content) {
        if (p.type === 'tool-result') done.add(p.toolCallId);
        if (p.type === 'tool-approval-request') requests.set(p.toolCallId, p);
        if (p.type === 'tool-approval-response') responded.add(p.approvalId);
      }
    }
    const pending = [];
    const settled = [];
    // Walk backwards so that inserted tool messages do not move the
    // assistant messages still to visit.
    for (let i = messages.length - 1; i >= 0; i--) {
      const m = messages[i];
      if (m?.role !== 'assistant' || !Array.isArray(m.content)) continue;
      const results = [];
      let content = m.content;
      for (const p of m.content) {
        if (p.type !== 'tool-call' || p.providerExecuted || !names.has(p.toolName) || done.has(p.toolCallId)) continue;
        const req = requests.get(p.toolCallId);
        // Decided in the SDK already: its next run executes or denies it.
        if (req && responded.has(req.approvalId)) continue;
        const out = checkSettled(await send(p.toolName, p.input ?? {}, p.toolCallId, { settle: true, wait: w }), p.toolName, p.toolCallId);
        if (out.status === 'pending') {
          // connhost is still finishing it (a retry is scheduled): no
          // outcome to write yet.
          pending.push({ toolCallId: p.toolCallId, toolName: p.toolName, status: out.status, executionId: out.executionId });
          continue;
        }
        if (out.status === 'awaiting_approval') {
          pending.push({ toolCallId: p.toolCallId, toolName: p.toolName, status: out.status, approvalId: out.approval?.id, executionId: out.executionId });
          if (!req) {
            // Killed before the SDK paused: pause it now, as the SDK would.
            content = [...content, {
              type: 'tool-approval-request',
              approvalId: out.approval?.id ?? `connhost-${p.toolCallId}`,
              toolCallId: p.toolCallId,
              reason: out.text,
            }];
          }
          continue;
        }
        settled.push({ toolCallId: p.toolCallId, toolName: p.toolName, status: out.status });
        if (req) {
          results.push({ type: 'tool-approval-response', approvalId: req.approvalId, approved: !out.denied, reason: out.text });
        }
        results.push({
          type: 'tool-result',
          toolCallId: p.toolCallId,
          toolName: p.toolName,
          output: out.denied ? { type: 'execution-denied', reason: out.text } : { type: 'text', value: out.text },
        });
      }
      if (content !== m.content) messages[i] = { ...m, content };
      if (results.length === 0) continue;
      const next = messages[i + 1];
      if (next?.role === 'tool' && Array.isArray(next.content)) {
        messages[i + 1] = { ...next, content: [...next.content, ...results] };
      } else {
        messages.splice(i + 1, 0, { role: 'tool', content: results });
      }
    }
    return { messages, pending, settled };
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

function holdsCall(messages, toolCallId) {
  for (const m of messages ?? []) {
    if (m?.role !== 'assistant' || !Array.isArray(m.content)) continue;
    if (m.content.some((p) => p.type === 'tool-call' && p.toolCallId === toolCallId)) return true;
  }
  return false;
}
