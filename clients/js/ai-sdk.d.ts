import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { ModelMessage, Tool } from 'ai';

/** Where connhost is: a connected MCP client, connhost mcp over stdio, or serve's /mcp. */
export type Target =
  | Client
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string; stderr?: 'inherit' | 'pipe' | 'ignore'; connectTimeoutMs?: number }
  | { url: string; token?: string; headers?: Record<string, string> };

export interface AiSdkOptions {
  /** The conversation's id (a chat id): the session of every call, the same when it is resumed. */
  sessionId: string;
  /** Stores the conversation's ModelMessage[] (the function your onStepFinish/onFinish uses); a call is saved through it before it runs. */
  save: (messages: ModelMessage[]) => unknown | Promise<unknown>;
  namespace?: string;
  /** Seconds connhost holds a call that awaits a reviewer (io.connhost/wait) before the SDK pauses on it. */
  wait?: number;
  /** The MCP request timeout of a call, in milliseconds. */
  timeoutMs?: number;
}

/** A call without an outcome yet: it awaits a reviewer, or connhost is still finishing it. */
export interface PendingCall {
  toolCallId: string;
  toolName: string;
  status: 'awaiting_approval' | 'pending';
  approvalId?: string;
  executionId?: string;
}

export interface ResumeResult {
  /** The conversation with the settled calls' results (and approval responses) written in. */
  messages: ModelMessage[];
  /** Calls without an outcome yet: the SDK cannot continue the conversation until they have one. */
  pending: PendingCall[];
  /** Calls settled now, with connhost's status. */
  settled: Array<{ toolCallId: string; toolName: string; status: string }>;
}

export interface ConnhostAiSdk {
  /** connhost's tools, for generateText / streamText / ToolLoopAgent. */
  tools: Record<string, Tool>;
  /** Reconciles a conversation restored from its saved messages before the model is asked again. */
  resume(messages: ModelMessage[], options?: { wait?: number }): Promise<ResumeResult>;
  client: Client;
  /** Closes the connection if connhostAiSdk opened it. */
  close(): Promise<void>;
}

/** Connects to connhost and returns its tools for the AI SDK, with resume() for a restored conversation. */
export declare function connhostAiSdk(target: Target, options: AiSdkOptions): Promise<ConnhostAiSdk>;
