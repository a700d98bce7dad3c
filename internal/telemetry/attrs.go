package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

const codesError = codes.Error

// Attribute keys. The gen_ai.*, mcp.*, jsonrpc.*, http.*, url.*, server.*
// and error.type keys are the OpenTelemetry semantic conventions' (GenAI,
// MCP, HTTP); connhost.* are connhost's own. None holds an argument value,
// a result, a header or a secret.
const (
	// GenAI (execute_tool spans).
	GenAIOperationName = attribute.Key("gen_ai.operation.name")
	GenAIToolName      = attribute.Key("gen_ai.tool.name")
	GenAIToolCallID    = attribute.Key("gen_ai.tool.call.id")
	GenAIToolType      = attribute.Key("gen_ai.tool.type")
	GenAIConversation  = attribute.Key("gen_ai.conversation.id")

	// MCP server spans.
	MCPMethodName      = attribute.Key("mcp.method.name")
	MCPSessionID       = attribute.Key("mcp.session.id")
	MCPProtocolVersion = attribute.Key("mcp.protocol.version")
	JSONRPCRequestID   = attribute.Key("jsonrpc.request.id")

	// HTTP server and client spans.
	HTTPRequestMethod  = attribute.Key("http.request.method")
	HTTPRoute          = attribute.Key("http.route")
	HTTPResponseStatus = attribute.Key("http.response.status_code")
	URLPath            = attribute.Key("url.path")
	URLScheme          = attribute.Key("url.scheme")
	ServerAddress      = attribute.Key("server.address")
	ServerPort         = attribute.Key("server.port")
	ErrorType          = attribute.Key("error.type")

	// connhost's own.
	ExecutionID = attribute.Key("connhost.execution.id")
	Namespace   = attribute.Key("connhost.namespace")
	Connector   = attribute.Key("connhost.connector")
	Operation   = attribute.Key("connhost.operation")
	Export      = attribute.Key("connhost.export")
	Policy      = attribute.Key("connhost.policy")
	Attempt     = attribute.Key("connhost.attempt")
	Decision    = attribute.Key("connhost.decision")
	State       = attribute.Key("connhost.state")
	FromState   = attribute.Key("connhost.from_state")
	ApprovalID  = attribute.Key("connhost.approval.id")
	Durability  = attribute.Key("connhost.ledger.durability")
	Actor       = attribute.Key("connhost.actor")
	Recorded    = attribute.Key("connhost.recorded")
	Claimed     = attribute.Key("connhost.fleet.claimed")
	Pending     = attribute.Key("connhost.recovery.pending")
	Outcome     = attribute.Key("connhost.outcome")
)

// Span names.
const (
	// SpanExecutePrefix + tool ("execute_tool payments.create_payment") is
	// the GenAI convention's name of one tool execution.
	SpanExecutePrefix = "execute_tool "
	SpanCheckArgs     = "connhost.check_arguments"
	SpanIntent        = "connhost.ledger.intent"
	SpanDispatch      = "connhost.ledger.dispatch"
	SpanOutcome       = "connhost.ledger.outcome"
	SpanTransition    = "connhost.ledger.transition"
	SpanSync          = "connhost.ledger.sync"
	SpanWasmCall      = "connhost.wasm.call"
	SpanRecover       = "connhost.recover"
	SpanApprove       = "connhost.approve"
	SpanReject        = "connhost.reject"
	SpanResolve       = "connhost.resolve"
	SpanClaim         = "connhost.fleet.claim"
)
