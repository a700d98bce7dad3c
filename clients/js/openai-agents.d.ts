import type { Agent, FunctionTool, MCPServer, RunContext, RunState } from '@openai/agents';

export interface ConnhostToolsOptions<TContext = unknown> {
  /** The conversation the run belongs to, the same when it is resumed; or a function of the run context. */
  sessionId: string | ((runContext: RunContext<TContext>, details: unknown) => string | Promise<string>);
  namespace?: string;
  /** The runtime's own human-in-the-loop pause before a tool runs (the tool() option). */
  needsApproval?: boolean | ((runContext: RunContext<TContext>, input: unknown, callId?: string) => boolean | Promise<boolean>);
}

/** connhost's tools on a connected MCP server, as function tools that pass the call identity. */
export declare function connhostTools<TContext = unknown>(server: MCPServer, options: ConnhostToolsOptions<TContext>): Promise<FunctionTool<TContext>[]>;

/** RunState.fromString for a run that uses connhostTools; { resumed: true } marks its pending calls io.connhost/resumed. */
export declare function restoreRunState<TContext = unknown>(agent: Agent<TContext, any>, serialized: string, options?: { resumed?: boolean }): Promise<RunState<TContext, Agent<TContext, any>>>;
