export declare const META_SESSION_ID: 'io.connhost/session_id';
export declare const META_TOOL_CALL_ID: 'io.connhost/tool_call_id';
export declare const META_NAMESPACE: 'io.connhost/namespace';
export declare const META_RESUMED: 'io.connhost/resumed';
export declare const MAX_ID_BYTES: 256;

export interface CallIdentity {
  sessionId: string;
  toolCallId: string;
  namespace?: string;
  resumed?: boolean;
}

/** The _meta object of one tools/call; throws TypeError on an id connhost would refuse. */
export declare function identityMeta(ids: CallIdentity): Record<string, string | boolean>;
/** The text of a tools/call result, for the model. */
export declare function resultText(result: { content?: Array<{ type: string; text?: string }>; structuredContent?: unknown }): string;
/** The text for the model when a call's answer did not arrive. */
export declare function unknownOutcome(tool: string, error: unknown): string;
