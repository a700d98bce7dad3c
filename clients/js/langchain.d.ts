import type { DynamicStructuredTool } from '@langchain/core/tools';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

export interface LoadConnhostToolsOptions {
  /** The session; the default is the run's config.configurable.thread_id. */
  sessionId?: string | ((config: unknown) => string);
  namespace?: string;
  /** The MCP request timeout of a call, in milliseconds (the SDK's default otherwise); longer than wait. */
  timeoutMs?: number;
  /** Seconds connhost holds a call that awaits approval before the graph pauses with interrupt() (io.connhost/wait). */
  wait?: number;
}

/** connhost's tools on a connected MCP client, as LangChain tools that pass the call identity. */
export declare function loadConnhostTools(client: Client, options?: LoadConnhostToolsOptions): Promise<DynamicStructuredTool[]>;

export interface ResumeThreadOptions {
  /** The state's messages channel; the default is "messages". */
  messagesKey?: string;
  /** The tool node the settled answers are written as; the default is the node the thread runs next. */
  asNode?: string;
}

/**
 * Settles the connhost tool calls a thread holds without a ToolMessage by
 * their original ids, writes the answers into the thread and goes on
 * (graph.invoke(null, config)); while a call awaits a human the thread stays paused.
 */
export declare function resumeThread(
  graph: { getState(config: any): Promise<any>; updateState(config: any, values: any, asNode?: string): Promise<any>; invoke(input: any, config: any): Promise<any> },
  config: { configurable: { thread_id: string; [k: string]: unknown } },
  tools: DynamicStructuredTool[],
  options?: ResumeThreadOptions,
): Promise<any>;
