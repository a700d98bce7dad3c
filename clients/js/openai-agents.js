// connhost's MCP tools for @openai/agents, with the call identity wired
// through: every call passes the run's session and the model's tool-call
// id (details.toolCall.callId) as _meta, and a call replayed from a saved
// RunState is marked resumed.
//
//   import { MCPServerStdio, Agent, run } from '@openai/agents';
//   import { connhostTools, restoreRunState } from '@connhost/runtimes/openai-agents';
//
//   const connhost = new MCPServerStdio({ command: 'connhost', args: ['mcp', '--config', 'connhost.toml'] });
//   await connhost.connect();
//   const agent = new Agent({ name: 'pay', model, tools: await connhostTools(connhost, { sessionId: conversationId }) });
//
// Give the agent these tools instead of mcpServers: [connhost] (whose
// tools pass no ids). After a crash, resume from the saved state with
// restoreRunState(agent, saved) instead of RunState.fromString.
import { RunState, tool } from '@openai/agents';

import { identityMeta, resultText, unknownOutcome } from './index.js';

// The tool-call ids each restored run held when it was saved: calls the
// crashed process may already have sent.
const replayed = new WeakMap();

/**
 * connhostTools lists the tools of a connected @openai/agents MCP server
 * (MCPServerStdio, MCPServerStreamableHttp) that runs connhost, as
 * function tools that pass the call identity.
 *
 * @param {import('@openai/agents').MCPServer} server connected
 * @param {{sessionId: string | ((runContext: import('@openai/agents').RunContext, details: object) => string | Promise<string>), namespace?: string, needsApproval?: boolean | ((runContext: import('@openai/agents').RunContext, input: unknown, callId?: string) => boolean | Promise<boolean>)}} options
 *   sessionId: the id of the conversation the run belongs to, the same
 *   when the run is resumed (a Session's getSessionId(), your
 *   conversation id), or a function of the run context that returns it.
 *   needsApproval: the runtime's own human-in-the-loop pause before a
 *   tool runs (see the tool() option), e.g. to save the run there; it is
 *   the runtime's, not connhost's approval, which a gated operation asks
 *   for in addition.
 * @returns {Promise<import('@openai/agents').FunctionTool[]>}
 */
export async function connhostTools(server, options = {}) {
  const { sessionId, namespace, needsApproval } = options;
  if (typeof sessionId !== 'function' && (typeof sessionId !== 'string' || sessionId === '')) {
    throw new TypeError('connhostTools: options.sessionId is required: the id of the conversation the run belongs to (a string, or a function of the run context)');
  }
  const listed = await server.listTools();
  return listed.map((t) => {
    const schema = t.inputSchema ?? {};
    return tool({
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
      ...(needsApproval !== undefined ? { needsApproval } : {}),
      execute: async (input, runContext, details) => {
        const callId = details?.toolCall?.callId;
        if (!callId) {
          throw new Error(`connhost: ${t.name} was invoked without a tool call (details.toolCall.callId), so it has no stable identity`);
        }
        const session = typeof sessionId === 'function' ? await sessionId(runContext, details) : sessionId;
        const meta = identityMeta({
          sessionId: session,
          toolCallId: callId,
          namespace,
          resumed: replayed.get(runContext)?.has(callId) === true,
        });
        const args = typeof input === 'string' ? (input ? JSON.parse(input) : {}) : (input ?? {});
        const result = await server.callToolResult(t.name, args, meta, details?.signal ? { signal: details.signal } : undefined);
        return resultText(result);
      },
      // Not the runtime's "Please try again": a new call would be a new
      // execution.
      errorFunction: (_context, error) => unknownOutcome(t.name, error),
    });
  });
}

/**
 * restoreRunState is RunState.fromString for a run that uses
 * connhostTools. The tool calls a saved state holds are issued again when
 * the run resumes, with the same tool-call ids, so connhost answers one
 * the crashed process had sent from its ledger instead of acting twice;
 * that needs nothing more. With { resumed: true } those calls also carry
 * io.connhost/resumed: pass it when the state may predate connhost's
 * ledger (a run restored from a backup, a ledger reset or moved), and
 * connhost then refuses to guess about a call in a session it has never
 * seen (recovery_required, for an operator) instead of running it. Without
 * it, a resumed call in a new session simply runs, which is right when
 * the ledger is the one the run always used: connhost records a call
 * before it acts, so no record means it never ran.
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
