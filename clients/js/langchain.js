// connhost's MCP tools for LangChain and LangGraph, with the call
// identity wired through: every call passes the thread id
// (config.configurable.thread_id) as the session and the model's
// tool-call id (config.toolCall.id) as _meta.
//
//   import { Client } from '@modelcontextprotocol/sdk/client/index.js';
//   import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
//   import { loadConnhostTools } from '@connhost/runtimes/langchain';
//
//   const client = new Client({ name: 'my-agent', version: '1.0.0' });
//   await client.connect(new StdioClientTransport({ command: 'connhost', args: ['mcp', '--config', 'connhost.toml'] }));
//   const tools = await loadConnhostTools(client);
//   // bind them to the model and hand them to a ToolNode; run the graph
//   // with a checkpointer and { configurable: { thread_id } }.
//
// Use these tools instead of @langchain/mcp-adapters' loadMcpTools for
// connhost (which sends {name, arguments} only). A MultiServerMCPClient's
// connection works too: loadConnhostTools(await mcp.getClient('connhost')).
import { DynamicStructuredTool } from '@langchain/core/tools';

import { identityMeta, resultText, unknownOutcome } from './index.js';

/**
 * loadConnhostTools lists the tools of a connected MCP client (an
 * @modelcontextprotocol/sdk Client) talking to connhost, as LangChain
 * tools that pass the call identity. The model's tool-call id comes from
 * the ToolCall the tool is invoked with (LangGraph's ToolNode does that);
 * the session from options.sessionId, else the thread id of the run
 * (config.configurable.thread_id), the same when a checkpointer resumes
 * the thread.
 *
 * @param {import('@modelcontextprotocol/sdk/client/index.js').Client} client connected
 * @param {{sessionId?: string | ((config: object) => string), namespace?: string, timeoutMs?: number}} [options]
 * @returns {Promise<DynamicStructuredTool[]>}
 */
export async function loadConnhostTools(client, options = {}) {
  const { sessionId, namespace, timeoutMs } = options;
  const listed = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    listed.push(...(page.tools ?? []));
    cursor = page.nextCursor;
  } while (cursor);
  return listed.map((t) => new DynamicStructuredTool({
    name: t.name,
    description: t.description ?? '',
    schema: { ...(t.inputSchema ?? {}), type: 'object', properties: t.inputSchema?.properties ?? {} },
    metadata: { annotations: t.annotations },
    func: async (args, _runManager, config) => {
      const toolCallId = config?.toolCall?.id;
      if (!toolCallId) {
        throw new Error(`connhost: ${t.name} was invoked without a tool call (config.toolCall.id): invoke it with the model's ToolCall, as ToolNode does`);
      }
      let session = typeof sessionId === 'function' ? sessionId(config) : sessionId;
      session ??= config?.configurable?.thread_id;
      if (session === undefined) {
        throw new Error(`connhost: ${t.name} has no session: run the graph with { configurable: { thread_id } }, or pass options.sessionId`);
      }
      const meta = identityMeta({ sessionId: String(session), toolCallId, namespace });
      let result;
      try {
        result = await client.callTool({ name: t.name, arguments: args ?? {}, _meta: meta }, undefined, {
          ...(config?.signal ? { signal: config.signal } : {}),
          ...(timeoutMs ? { timeout: timeoutMs } : {}),
        });
      } catch (error) {
        if (config?.signal?.aborted) throw error;
        // Not "Please fix your mistakes": a new call would be a new
        // execution.
        return unknownOutcome(t.name, error);
      }
      return resultText(result);
    },
  }));
}
