// connhost's MCP tools for @openai/agents, with the call identity wired
// through, a run saved before each connhost call leaves it, resumed by
// reconciliation after a crash, and connhost's approvals mapped onto the
// runtime's own interruptions.
//
//   import { Agent, MCPServerStdio } from '@openai/agents';
//   import { connhostTools, runWithConnhost, restoreRunState } from '@connhost/runtimes/openai-agents';
//
//   const connhost = new MCPServerStdio({ command: 'connhost', args: ['mcp', '--config', 'connhost.toml'], env: { ...process.env } });
//   await connhost.connect();
//   const agent = new Agent({ name: 'pay', model, tools: await connhostTools(connhost, { sessionId: conversationId }) });
//   const save = (s) => writeFile('run.json', s);
//   let result = await runWithConnhost(agent, 'Pay invoice 42.', { save });
//   // after a restart, or once a reviewer decided:
//   result = await runWithConnhost(agent, await restoreRunState(agent, await readFile('run.json', 'utf8')), { save });
//
// How: every connhost tool asks for the runtime's human-in-the-loop pause
// (needsApproval), the one place @openai/agents hands out its RunState
// before a tool runs. runWithConnhost saves the state there, sends the
// call, hands the answer to the runtime as the tool's output and lets the
// run go on. A state handed back in (restored after a crash, or paused
// while a human decides) holds the calls that have no result: each is
// settled by its original ids (io.connhost/settle), so the model reads the
// recorded outcome, or the approved call runs now, once; only a call that
// never reached connhost comes back to the model as not done.
import { RunResult, RunState, run, tool } from '@openai/agents';

import { callStatus, identityMeta, resultText, unknownOutcome, unsettled } from './index.js';

// How each connhost tool reaches connhost: tool → {server, name, options}.
const connhostOf = new WeakMap();
// The answers runWithConnhost got for calls, by run context and call id,
// for the tools' execute to hand the runtime.
const answered = new WeakMap();
// The tool-call ids a state restored with { resumed: true } held.
const replayed = new WeakMap();

/**
 * connhostTools lists the tools of a connected @openai/agents MCP server
 * (MCPServerStdio, MCPServerStreamableHttp) that runs connhost, as
 * function tools that pass the call identity and pause the run before
 * they run (needsApproval), so that runWithConnhost can save it first.
 *
 * @param {import('@openai/agents').MCPServer} server connected
 * @param {{sessionId: string | ((runContext: import('@openai/agents').RunContext, details: object) => string | Promise<string>), namespace?: string, wait?: number}} options
 *   sessionId: the id of the conversation the run belongs to, the same
 *   when the run is resumed (a Session's getSessionId(), your
 *   conversation id), or a function of the run context that returns it.
 *   wait: seconds connhost holds a call that awaits a human's approval
 *   (io.connhost/wait) before the run pauses; the server's request
 *   timeout (its `timeout` option, in ms) must be longer.
 * @returns {Promise<import('@openai/agents').FunctionTool[]>}
 */
export async function connhostTools(server, options = {}) {
  const { sessionId } = options;
  if (typeof sessionId !== 'function' && (typeof sessionId !== 'string' || sessionId === '')) {
    throw new TypeError('connhostTools: options.sessionId is required: the id of the conversation the run belongs to (a string, or a function of the run context)');
  }
  const listed = await server.listTools();
  return listed.map((t) => {
    const schema = t.inputSchema ?? {};
    const ft = tool({
      name: t.name,
      description: t.description ?? '',
      parameters: {
        ...schema,
        type: 'object',
        properties: schema.properties ?? {},
        required: schema.required ?? [],
        additionalProperties: schema.additionalProperties ?? true,
      },
      strict: false,
      // The pause where the run is saved before the call leaves it.
      needsApproval: true,
      execute: async (_input, runContext, details) => {
        const call = details?.toolCall;
        if (!call?.callId) {
          throw new Error(`connhost: ${t.name} was invoked without a tool call (details.toolCall.callId), so it has no stable identity`);
        }
        const got = answered.get(runContext);
        if (got?.has(call.callId)) {
          const text = got.get(call.callId);
          got.delete(call.callId);
          return text;
        }
        // Approved by the application itself (run() instead of
        // runWithConnhost): send it now; a call of a restored state is
        // settled.
        const settle = replayed.get(runContext)?.has(call.callId) === true;
        const result = await callConnhost(ft, runContext, call, { settle, signal: details?.signal });
        return resultText(result);
      },
      // Not the runtime's "Please try again": a new call would be a new
      // execution.
      errorFunction: (_context, error) => unknownOutcome(t.name, error),
    });
    connhostOf.set(ft, { server, name: t.name, options });
    return ft;
  });
}

// callConnhost sends one call of tool ft (a function_call item) with its
// identity.
async function callConnhost(ft, runContext, call, { settle, signal } = {}) {
  const { server, name, options } = connhostOf.get(ft);
  const session = typeof options.sessionId === 'function'
    ? await options.sessionId(runContext, { toolCall: call })
    : options.sessionId;
  const meta = identityMeta({
    sessionId: session,
    toolCallId: call.callId,
    namespace: options.namespace,
    resumed: replayed.get(runContext)?.has(call.callId) === true,
    settle,
    wait: options.wait,
  });
  const args = typeof call.arguments === 'string' ? (call.arguments ? JSON.parse(call.arguments) : {}) : (call.arguments ?? {});
  return server.callToolResult(name, args, meta, signal ? { signal } : undefined);
}

// connhostToolOf returns the connhost tool an interruption is for, or
// undefined for another tool's.
function connhostToolOf(item) {
  if (item?.rawItem?.type !== 'function_call') return undefined;
  const tools = item.agent?.tools ?? [];
  return tools.find((t) => connhostOf.has(t) && t.name === item.rawItem.name);
}

/**
 * runWithConnhost runs agent like run(agent, input, options), saving the
 * run before each connhost call leaves it and sending the call itself.
 *
 * input is the run's input, or a RunState to go on with: one restored
 * after a crash (restoreRunState), or the state of a run that paused
 * while a human decides a gated call. The connhost calls such a state
 * holds without a result are settled by their original ids before the
 * model is asked anything: a call that reached connhost answers its
 * recorded outcome (or, approved meanwhile, runs now, once); one that
 * never did answers that it did not run, and only then may the model
 * issue it again.
 *
 * A call that awaits a human's approval (after options.wait of
 * connhostTools, if set) pauses the run at the runtime's interruption:
 * the result has no finalOutput, result.interruptions holds the call and
 * result.awaitingApproval says which approval to decide. Call
 * runWithConnhost(agent, result.state) (or the restored state) once it is
 * decided: an approved call runs with no new model request, a rejected
 * one reaches the model as a refusal. A call connhost is still finishing
 * (pending: a retry scheduled later) pauses the run the same way;
 * result.unsettled lists every call the run waits on.
 *
 * Interruptions of other tools are returned as run() returns them (their
 * connhost calls in the same turn are sent first). When a
 * call's answer does not arrive (connhost unreachable), runWithConnhost
 * throws: the saved state still holds the call, to settle later; so does
 * a saved call connhost refuses to settle (nothing was done).
 *
 * @param {import('@openai/agents').Agent} agent
 * @param {string | import('@openai/agents').AgentInputItem[] | RunState} input
 * @param {{save?: (serialized: string) => unknown | Promise<unknown>} & Record<string, unknown>} [options]
 *   save: stores the serialized RunState (RunState.toString()); called,
 *   and awaited, before each connhost call leaves the run, when the run
 *   pauses and when it ends. Without it a crash leaves nothing to resume.
 *   The other options are run()'s.
 * @returns {Promise<import('@openai/agents').RunResult & {awaitingApproval: Array<object>, unsettled: Array<object>}>}
 */
export async function runWithConnhost(agent, input, options = {}) {
  const { save, ...runOptions } = options;
  if (runOptions.stream) {
    throw new TypeError('runWithConnhost: stream is not supported: it reads each run\'s interruptions to send the calls, which a streamed result has only once consumed');
  }
  let result;
  let state;
  // The calls of a state handed in are settled; calls the model makes
  // while this function runs are sent as new.
  const settle = new Set();
  if (input instanceof RunState) {
    state = input;
    for (const item of state.getInterruptions()) {
      if (connhostToolOf(item)) settle.add(item.rawItem.callId);
    }
  } else {
    result = await run(agent, input, runOptions);
    state = result.state;
  }
  for (;;) {
    const pending = result ? result.interruptions ?? [] : state.getInterruptions();
    const ours = pending.filter((item) => connhostToolOf(item));
    if (ours.length === 0) {
      if (!result && pending.length > 0) {
        // A state handed in paused for the application's own tools only:
        // the runtime applies its decisions.
        result = await run(agent, state, runOptions);
        state = result.state;
        continue;
      }
      // Ended, or paused for the application's own approvals.
      if (save) await save(state.toString());
      return withPause(result ?? new RunResult(state), []);
    }
    if (save) await save(state.toString());
    // A call whose answer does not arrive throws: the saved state still
    // holds it, and runWithConnhost on that state settles it.
    const answers = await Promise.all(ours.map((item) =>
      callConnhost(connhostToolOf(item), state._context, item.rawItem, { settle: settle.has(item.rawItem.callId) })));
    ours.forEach((item, i) => {
      if (settle.has(item.rawItem.callId) && callStatus(answers[i]) === 'refused') {
        // Nothing was done, and the call is not settled (a fenced
        // session, other arguments under its id): written in as its
        // result it would end the call for the run while connhost still
        // holds it. The saved state stays as it was.
        throw new Error(`connhost: the saved call ${item.rawItem.name} (tool-call id ${item.rawItem.callId}) could not be settled, and the run was left as it was: ${resultText(answers[i])}`);
      }
    });
    const held = answers.map(unsettled).filter(Boolean);
    if (held.length > 0) {
      // The run stays at its interruption until a human decides (or
      // connhost finishes the call); every call is settled again when it
      // goes on (the answered ones answer their recorded outcome).
      return withPause(result ?? new RunResult(state), held);
    }
    let got = answered.get(state._context);
    if (!got) answered.set(state._context, (got = new Map()));
    ours.forEach((item, i) => {
      got.set(item.rawItem.callId, resultText(answers[i]));
      state.approve(item);
    });
    settle.clear();
    result = await run(agent, state, runOptions);
    state = result.state;
  }
}

function withPause(result, held) {
  const define = (name, value) => Object.defineProperty(result, name, { value, enumerable: true, configurable: true });
  define('unsettled', held);
  define('awaitingApproval', held.filter((h) => h.status === 'awaiting_approval'));
  return result;
}

/**
 * restoreRunState is RunState.fromString for a run that uses
 * connhostTools; hand the state to runWithConnhost, which settles the
 * calls it holds without a result. With { resumed: true } those calls
 * also carry io.connhost/resumed: pass it when the state may predate
 * connhost's ledger (a run restored from a backup, a ledger reset or
 * moved), and connhost then refuses to guess about a call in a session it
 * has never seen (recovery_required, for an operator) instead of
 * answering that it never ran.
 *
 * @param {import('@openai/agents').Agent} agent
 * @param {string} serialized what RunState.toString() returned
 * @param {{resumed?: boolean}} [options]
 * @returns {Promise<RunState>}
 */
export async function restoreRunState(agent, serialized, options = {}) {
  const state = await RunState.fromString(agent, serialized);
  if (options.resumed) {
    const ids = new Set();
    collectCallIds(JSON.parse(serialized), ids);
    replayed.set(state._context, ids);
  }
  return state;
}

function collectCallIds(v, ids) {
  if (Array.isArray(v)) {
    for (const e of v) collectCallIds(e, ids);
  } else if (v && typeof v === 'object') {
    if (v.type === 'function_call' && typeof v.callId === 'string') ids.add(v.callId);
    for (const e of Object.values(v)) collectCallIds(e, ids);
  }
}
