import type { Agent } from '@mastra/core/agent';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

export type { Target } from './ai-sdk.js';
import type { Target } from './ai-sdk.js';

export interface MastraOptions {
  /** The session of every call; the default is the memory thread (context.agent.threadId), else the run id. */
  sessionId?: string | ((context: unknown) => string | undefined);
  namespace?: string;
  /** Seconds connhost holds a call that awaits a reviewer (io.connhost/wait) before the run suspends on it. */
  wait?: number;
  /** The MCP request timeout of a call, in milliseconds. */
  timeoutMs?: number;
}

export interface MastraResumeResult {
  /** The continued run's output (resumeGenerate or generate), or undefined when nothing was continued. */
  output: any;
  /** Calls without an outcome yet: awaiting a reviewer, or still being finished by connhost. */
  pending: Array<{ toolCallId: string; toolName: string; status: 'awaiting_approval' | 'pending'; approvalId?: string; executionId?: string; runId?: string }>;
  /** Unanswered calls settled now and written into the thread, with connhost's status. */
  settled: Array<{ toolCallId: string; toolName: string; status: string }>;
  /** The suspended runs found for connhost's calls. */
  suspended: Array<{ runId: string; toolCallId: string; toolName: string }>;
}

export interface ConnhostMastra {
  /** connhost's tools, for new Agent({ tools }). */
  tools: Record<string, any>;
  /** Continues a thread whose run was interrupted (killed, or suspended for a reviewer). */
  resume(agent: Agent<any, any, any>, memory: { thread: string | { id: string }; resource: string }, options?: { wait?: number } & Record<string, unknown>): Promise<MastraResumeResult>;
  client: Client;
  /** Closes the connection if connhostMastra opened it. */
  close(): Promise<void>;
}

/** Connects to connhost and returns its tools for a Mastra agent, with resume() for an interrupted thread. */
export declare function connhostMastra(target: Target, options?: MastraOptions): Promise<ConnhostMastra>;
