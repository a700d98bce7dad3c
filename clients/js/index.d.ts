export declare const META_SESSION_ID: 'io.connhost/session_id';
export declare const META_TOOL_CALL_ID: 'io.connhost/tool_call_id';
export declare const META_NAMESPACE: 'io.connhost/namespace';
export declare const META_RESUMED: 'io.connhost/resumed';
export declare const META_SETTLE: 'io.connhost/settle';
export declare const META_WAIT: 'io.connhost/wait';
export declare const MAX_ID_BYTES: 256;

export interface CallIdentity {
  sessionId: string;
  toolCallId: string;
  namespace?: string;
  resumed?: boolean;
  /** The call is one a resumed run settles (io.connhost/settle). */
  settle?: boolean;
  /** Seconds connhost holds a call that awaits approval (io.connhost/wait). */
  wait?: number;
}

/** A call connhost holds for a human's decision. */
export interface AwaitingApproval {
  approvalId: string;
  argsDigest: string;
  executionId: string;
  expiresAt?: string;
  sessionId: string;
  toolCallId: string;
}

/** A call connhost has not finished: awaiting a human's approval, or pending (still being finished). */
export interface UnsettledCall {
  status: 'awaiting_approval' | 'pending';
  executionId: string;
  sessionId: string;
  toolCallId: string;
  approvalId?: string;
  argsDigest?: string;
  expiresAt?: string;
  nextAttemptAt?: string;
}

type CallToolResultLike = { content?: Array<{ type: string; text?: string }>; structuredContent?: unknown; isError?: boolean };

/** The _meta object of one tools/call; throws TypeError on an id connhost would refuse. */
export declare function identityMeta(ids: CallIdentity): Record<string, string | boolean | number>;
/** The text of a tools/call result, for the model. */
export declare function resultText(result: CallToolResultLike): string;
/** The status connhost gave a tools/call result. */
export declare function callStatus(result: CallToolResultLike): string | undefined;
/** The approval a result awaits, or undefined. */
export declare function awaitingApproval(result: CallToolResultLike): AwaitingApproval | undefined;
/** The call a result leaves unfinished (awaiting approval, pending), or undefined. */
export declare function unsettled(result: CallToolResultLike): UnsettledCall | undefined;
/** The text for the model when a call's answer did not arrive. */
export declare function unknownOutcome(tool: string, error: unknown): string;
