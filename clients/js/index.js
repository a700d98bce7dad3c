// The identity connhost keys its promises on, as MCP _meta keys, and the
// checks every adapter applies before a call leaves the runtime.
//
// connhost deduplicates a tool call by (session, tool-call id): the same
// ids again return the recorded outcome instead of acting twice. MCP's
// tools/call carries neither, so a runtime passes them in the request's
// _meta. The adapters in ./openai-agents.js and ./langchain.js do that with
// the ids their runtime already has.

/** _meta key of the call's session (a conversation, a thread, a run). */
export const META_SESSION_ID = 'io.connhost/session_id';
/** _meta key of the model's tool-call id, stable across the runtime's retries. */
export const META_TOOL_CALL_ID = 'io.connhost/tool_call_id';
/** _meta key of the call's namespace (optional). */
export const META_NAMESPACE = 'io.connhost/namespace';
/** _meta key marking a call replayed from a saved run (optional). */
export const META_RESUMED = 'io.connhost/resumed';
/**
 * _meta key of a settle: the call is one a resumed run found in its saved
 * state without a result. connhost answers its recorded outcome, runs it
 * if it was approved meanwhile, and runs nothing for ids it never saw (it
 * records them cancelled: the model may issue the call again).
 */
export const META_SETTLE = 'io.connhost/settle';
/**
 * _meta key of the seconds connhost holds a call that awaits approval,
 * until a reviewer decides (an approved call then runs in the same
 * request).
 */
export const META_WAIT = 'io.connhost/wait';

/** The longest id connhost accepts, in UTF-8 bytes. */
export const MAX_ID_BYTES = 256;

/**
 * identityMeta returns the _meta object of one tools/call, after the
 * checks connhost applies (a non-empty string of valid UTF-16 without
 * control characters, at most MAX_ID_BYTES in UTF-8), so that a bad id
 * fails in the runtime with its name instead of as a refused call.
 * settle marks a call a resumed run settles (META_SETTLE); wait, in
 * seconds, holds a call that awaits approval until a reviewer decides
 * (META_WAIT).
 *
 * @param {{sessionId: string, toolCallId: string, namespace?: string, resumed?: boolean, settle?: boolean, wait?: number}} ids
 * @returns {Record<string, string|boolean|number>}
 */
export function identityMeta({ sessionId, toolCallId, namespace, resumed, settle, wait }) {
  const meta = {
    [META_SESSION_ID]: checkId('session id', sessionId),
    [META_TOOL_CALL_ID]: checkId('tool-call id', toolCallId),
  };
  if (namespace !== undefined) meta[META_NAMESPACE] = checkId('namespace', namespace);
  if (resumed) meta[META_RESUMED] = true;
  if (settle) meta[META_SETTLE] = true;
  if (wait !== undefined && wait !== 0) {
    if (typeof wait !== 'number' || !Number.isFinite(wait) || wait < 0) {
      throw new TypeError(`connhost: wait must be a number of seconds >= 0, got ${wait}`);
    }
    meta[META_WAIT] = wait;
  }
  return meta;
}

function checkId(what, v) {
  if (typeof v !== 'string' || v === '') {
    throw new TypeError(`connhost: the ${what} must be a non-empty string, got ${v === '' ? 'an empty string' : typeof v}`);
  }
  if (!v.isWellFormed()) {
    throw new TypeError(`connhost: the ${what} ${JSON.stringify(v)} holds an unpaired surrogate`);
  }
  // Unicode category Cc: C0, DEL, C1 (connhost refuses them).
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(v)) {
    throw new TypeError(`connhost: the ${what} ${JSON.stringify(v)} holds a control character`);
  }
  const n = Buffer.byteLength(v, 'utf8');
  if (n > MAX_ID_BYTES) {
    throw new TypeError(`connhost: the ${what} is ${n} bytes long; at most ${MAX_ID_BYTES} are allowed`);
  }
  return v;
}

/**
 * resultText is what the model reads of a tools/call result: its text
 * content (connhost always sends one text), or the structured content as
 * JSON when a result has no text. A call a human rejected, or whose
 * approval expired, also tells the model not to issue it again.
 *
 * @param {{content?: Array<{type: string, text?: string}>, structuredContent?: unknown}} result
 * @returns {string}
 */
export function resultText(result) {
  const texts = (result?.content ?? []).filter((c) => c?.type === 'text').map((c) => c.text);
  let text = texts.length > 0 ? texts.join('\n') : JSON.stringify(result?.structuredContent ?? result ?? null);
  const status = callStatus(result);
  if ((status === 'rejected' || status === 'expired') && !/do not issue/i.test(text)) {
    text += ` A human ${status === 'rejected' ? 'rejected' : 'did not approve'} this call: it was not done. Do not issue it again; tell the user.`;
  }
  return text;
}

/**
 * callStatus is the status connhost gave a tools/call result (succeeded,
 * awaiting_approval, pending, recovery_required, failed, rejected,
 * expired, cancelled, abandoned, refused), or undefined for a result
 * without connhost's structured content.
 *
 * @param {{structuredContent?: unknown}} result
 * @returns {string | undefined}
 */
export function callStatus(result) {
  const s = result?.structuredContent;
  return s && typeof s === 'object' && typeof s.status === 'string' ? s.status : undefined;
}

/**
 * awaitingApproval describes a call connhost holds for a human: the
 * approval a reviewer decides (console, `connhost approve`, the HTTP
 * API), or undefined when the result is something else.
 *
 * @param {{structuredContent?: unknown}} result
 * @returns {{approvalId: string, argsDigest: string, executionId: string, expiresAt?: string, sessionId: string, toolCallId: string} | undefined}
 */
export function awaitingApproval(result) {
  if (callStatus(result) !== 'awaiting_approval') return undefined;
  const s = result.structuredContent;
  return {
    approvalId: s.approval?.id,
    argsDigest: s.approval?.args_digest,
    executionId: s.execution_id,
    expiresAt: s.approval?.expires_at,
    sessionId: s.session_id,
    toolCallId: s.tool_call_id,
  };
}

/**
 * unsettled describes a call connhost has not finished: one that awaits a
 * human's approval (status awaiting_approval, with approvalId and
 * argsDigest), or one it is still finishing (status pending, with
 * nextAttemptAt). A run that holds such a call stays paused: resumed
 * later, the same ids answer its outcome. Undefined for any other result.
 *
 * @param {{structuredContent?: unknown}} result
 * @returns {{status: string, executionId: string, sessionId: string, toolCallId: string, approvalId?: string, argsDigest?: string, expiresAt?: string, nextAttemptAt?: string} | undefined}
 */
export function unsettled(result) {
  const status = callStatus(result);
  if (status === 'awaiting_approval') return { status, ...awaitingApproval(result) };
  if (status !== 'pending') return undefined;
  const s = result.structuredContent;
  return {
    status,
    executionId: s.execution_id,
    sessionId: s.session_id,
    toolCallId: s.tool_call_id,
    ...(s.next_attempt_at ? { nextAttemptAt: s.next_attempt_at } : {}),
  };
}

/**
 * unknownOutcome is the text for the model when the call's answer never
 * arrived (connhost unreachable, the connection dropped): the call may or
 * may not have run, and only the same call again (the same ids, which the
 * runtime re-sends when it resumes) can find out. A runtime's default
 * ("Please try again", "Please fix your mistakes") would make the model
 * issue a new call under a new id.
 *
 * @param {string} tool
 * @param {unknown} error
 * @returns {string}
 */
export function unknownOutcome(tool, error) {
  const why = error instanceof Error ? error.message : String(error);
  return `The outcome of ${tool} is unknown: its answer did not arrive (${why.split('\n')[0]}). ` +
    'It may or may not have been done. Do not issue this call again: tell the user, who can check it; ' +
    'when this run is resumed, the same call returns its recorded outcome.';
}
