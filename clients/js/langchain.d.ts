import type { DynamicStructuredTool } from '@langchain/core/tools';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

export interface LoadConnhostToolsOptions {
  /** The session; the default is the run's config.configurable.thread_id. */
  sessionId?: string | ((config: unknown) => string);
  namespace?: string;
  /** The MCP request timeout of a call, in milliseconds (the SDK's default otherwise). */
  timeoutMs?: number;
}

/** connhost's tools on a connected MCP client, as LangChain tools that pass the call identity. */
export declare function loadConnhostTools(client: Client, options?: LoadConnhostToolsOptions): Promise<DynamicStructuredTool[]>;
