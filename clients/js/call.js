// One tools/call to connhost as the adapters of ./ai-sdk.js and ./mastra.js
// send it: over an @modelcontextprotocol/sdk Client, with the call's
// identity, optionally settled (io.connhost/settle) or held for a reviewer
// (io.connhost/wait), and answered as an Outcome: the status connhost
// recorded and the text the model reads of it.
//
// Not exported by the package: its shape may change with the adapters.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';

import { identityMeta, META_SETTLE, META_WAIT, resultText, unknownOutcome } from './index.js';

// The statuses under which a call did not run and will not: the model is
// told so, and not to issue it again.
const DENIED = new Set(['rejected', 'expired']);

/**
 * connect returns a connected MCP client for target: a connected
 * @modelcontextprotocol/sdk Client as it is, or the command of a stdio
 * server ({command, args, env, cwd}; the environment is the process's,
 * with env on top, so that connhost mcp sees the secrets its config names),
 * or the URL of a Streamable HTTP endpoint ({url, token} or {url, headers}).
 *
 * @param {object} target
 * @param {string} name the client's name in initialize
 * @returns {Promise<{client: Client, owned: boolean}>} owned: connect made it (close closes it)
 */
export async function connect(target, name) {
  if (target && typeof target.callTool === 'function' && typeof target.listTools === 'function') {
    return { client: target, owned: false };
  }
  if (!target || (typeof target.command !== 'string' && typeof target.url !== 'string')) {
    throw new TypeError(`${name}: the target must be a connected @modelcontextprotocol/sdk Client, {command, args} of connhost mcp, or {url, token} of serve's /mcp`);
  }
  const client = new Client({ name, version: '0.1.0' });
  if (typeof target.command === 'string') {
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    await client.connect(new StdioClientTransport({
      command: target.command,
      args: target.args ?? [],
      // The SDK passes only HOME, PATH and the like by default; connhost
      // mcp reads the secrets its config names from the environment.
      env: { ...process.env, ...(target.env ?? {}) },
      ...(target.cwd ? { cwd: target.cwd } : {}),
      stderr: target.stderr ?? 'inherit',
    }), { timeout: target.connectTimeoutMs ?? 120_000 });
  } else {
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const headers = { ...(target.headers ?? {}) };
    if (target.token) headers.Authorization = `Bearer ${target.token}`;
    await client.connect(new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers } }));
  }
  return { client, owned: true };
}

/**
 * listTools lists every tool of the server, page by page.
 *
 * @param {Client} client
 * @returns {Promise<Array<{name: string, description?: string, inputSchema?: object, annotations?: object}>>}
 */
export async function listTools(client) {
  const listed = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    listed.push(...(page.tools ?? []));
    cursor = page.nextCursor;
  } while (cursor);
  return listed;
}

/**
 * objectSchema is a tool's input schema as a JSON schema of an object,
 * which model APIs require.
 *
 * @param {object | undefined} schema
 * @returns {object}
 */
export function objectSchema(schema) {
  return { ...(schema ?? {}), type: 'object', properties: schema?.properties ?? {} };
}

/**
 * @typedef {object} Outcome
 * @property {string} status connhost's status (succeeded, awaiting_approval, pending, failed,
 *   rejected, expired, cancelled, recovery_required, refused, …), or "unknown" when the answer
 *   did not arrive
 * @property {string} text what the model reads: connhost's text and what the model may do
 * @property {boolean} isError
 * @property {boolean} denied a reviewer rejected the call, or its approval expired: it did not run
 * @property {boolean} neverRan settled without a record: the call never reached connhost and did not run
 * @property {string} [executionId]
 * @property {string} [receipt]
 * @property {{id: string, argsDigest: string, expiresAt?: string}} [approval]
 * @property {object} [structured] the result's structuredContent
 */

/**
 * callConnhost sends one tools/call with the call's identity and answers
 * its Outcome; an answer that does not arrive (the connection broke, a
 * timeout) is an Outcome of status "unknown" unless signal was aborted.
 *
 * @param {Client} client
 * @param {{tool: string, args: object, sessionId: string, toolCallId: string, namespace?: string,
 *   settle?: boolean, wait?: number, signal?: AbortSignal, timeoutMs?: number}} call
 * @returns {Promise<Outcome>}
 */
export async function callConnhost(client, call) {
  const { tool, args, sessionId, toolCallId, namespace, settle, wait, signal, timeoutMs } = call;
  const meta = identityMeta({ sessionId, toolCallId, namespace });
  if (settle) meta[META_SETTLE] = true;
  const options = {};
  if (signal) options.signal = signal;
  if (timeoutMs) options.timeout = timeoutMs;
  if (wait > 0) {
    meta[META_WAIT] = wait;
    // The server sends progress every few seconds while it holds the
    // call: each one restarts the request's timeout, up to the wait.
    options.onprogress = () => {};
    options.resetTimeoutOnProgress = true;
    options.maxTotalTimeout = (wait + 120) * 1000;
  }
  let result;
  try {
    result = await client.callTool({ name: tool, arguments: args ?? {}, _meta: meta }, undefined, options);
  } catch (error) {
    if (signal?.aborted) throw error;
    return { status: 'unknown', text: unknownOutcome(tool, error), isError: true, denied: false, neverRan: false };
  }
  return outcomeOf(result);
}

/**
 * outcomeOf reads a tools/call result of connhost.
 *
 * @param {{content?: Array<{type: string, text?: string}>, structuredContent?: any, isError?: boolean}} result
 * @returns {Outcome}
 */
export function outcomeOf(result) {
  const sc = result?.structuredContent ?? {};
  const status = typeof sc.status === 'string' ? sc.status : (result?.isError ? 'failed' : 'succeeded');
  let text = resultText(result);
  const denied = DENIED.has(status);
  // Settled without a record: connhost recorded the ids as cancelled at
  // attempt 0, and nothing was dispatched.
  const neverRan = status === 'cancelled' && !(sc.attempt > 0);
  if (denied && !/do not issue/i.test(text)) {
    const why = typeof sc.approval?.reason === 'string' && sc.approval.reason !== '' ? ` (${sc.approval.reason})` : '';
    text += status === 'rejected'
      ? ` A reviewer rejected this call${why}; it was not done. Do not issue it again: tell the user.`
      : ' Its approval expired before anyone decided; it was not done. Do not issue it again: tell the user, who can ask for it anew.';
  }
  if (neverRan && !/issue it again|may be issued again/i.test(text)) {
    text += ' This call did not run. If it is still wanted, it may be issued again.';
  }
  const out = { status, text, isError: result?.isError === true, denied, neverRan, structured: sc };
  if (sc.execution_id) out.executionId = sc.execution_id;
  if (sc.receipt) out.receipt = sc.receipt;
  if (sc.approval?.id) {
    out.approval = { id: sc.approval.id, argsDigest: sc.approval.args_digest, ...(sc.approval.expires_at ? { expiresAt: sc.approval.expires_at } : {}) };
  }
  return out;
}

/**
 * checkSettled throws when a settle got no answer to write into a
 * runtime's history: connhost refused the settle itself (nothing was
 * done: a fenced session, an intent mismatch, a rate limit, a server that
 * does not settle), or its answer did not arrive. Written in as the
 * call's result, such an answer would end the call for the runtime while
 * connhost still holds it; thrown, it leaves the saved state as it was,
 * and a later resume settles the call again.
 *
 * @param {Outcome} out
 * @param {string} tool
 * @param {string} toolCallId
 * @returns {Outcome} out
 */
export function checkSettled(out, tool, toolCallId) {
  if (out.status === 'refused' || out.status === 'unknown') {
    const err = new Error(`connhost: the saved call ${tool} (tool-call id ${toolCallId}) could not be settled, and the conversation was left as it was: ${out.text}`);
    err.outcome = out;
    throw err;
  }
  return out;
}

/**
 * modelView is the plain object a runtime hands the model as the tool's
 * result (for runtimes that show the model the returned value, as
 * Mastra does): the status, the text with what the model may do, and the
 * ids and receipt.
 *
 * @param {Outcome} out
 * @returns {Record<string, unknown>}
 */
export function modelView(out) {
  const v = { status: out.status, text: out.text };
  if (out.receipt) v.receipt = out.receipt;
  if (out.executionId) v.execution_id = out.executionId;
  if (out.approval) v.approval_id = out.approval.id;
  // The connector's own result, as connhost recorded it.
  if (out.structured?.result !== undefined) v.result = out.structured.result;
  return v;
}
