import type { Agent, AgentInputItem, FunctionTool, MCPServer, RunContext, RunResult, RunState } from '@openai/agents';

import type { AwaitingApproval, UnsettledCall } from './index.js';

export interface ConnhostToolsOptions<TContext = unknown> {
  /** The conversation the run belongs to, the same when it is resumed; or a function of the run context. */
  sessionId: string | ((runContext: RunContext<TContext>, details: unknown) => string | Promise<string>);
  namespace?: string;
  /** Seconds connhost holds a call that awaits approval before the run pauses (io.connhost/wait). */
  wait?: number;
}

/** connhost's tools on a connected MCP server, as function tools that pass the call identity and pause the run before they run. */
export declare function connhostTools<TContext = unknown>(server: MCPServer, options: ConnhostToolsOptions<TContext>): Promise<FunctionTool<TContext>[]>;

export interface RunWithConnhostOptions {
  /** Stores RunState.toString(); awaited before each connhost call leaves the run, when it pauses and when it ends. */
  save?: (serialized: string) => unknown | Promise<unknown>;
  [runOption: string]: unknown;
}

/**
 * run() that saves the run before each connhost call, settles the calls a
 * RunState handed in holds without a result, and pauses at the runtime's
 * interruption while a call awaits a human (awaitingApproval).
 */
export declare function runWithConnhost<TContext = unknown, TAgent extends Agent<TContext, any> = Agent<TContext, any>>(
  agent: TAgent,
  input: string | AgentInputItem[] | RunState<TContext, TAgent>,
  options?: RunWithConnhostOptions,
): Promise<RunResult<TContext, TAgent> & { awaitingApproval: AwaitingApproval[]; unsettled: UnsettledCall[] }>;

/** RunState.fromString for a run that uses connhostTools; { resumed: true } marks its pending calls io.connhost/resumed. */
export declare function restoreRunState<TContext = unknown>(agent: Agent<TContext, any>, serialized: string, options?: { resumed?: boolean }): Promise<RunState<TContext, Agent<TContext, any>>>;
