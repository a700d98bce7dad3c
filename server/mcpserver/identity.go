package mcpserver

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/server/httpapi"
)

// RuntimeKey is a _meta key through which a runtime already sends the
// model's tool-call id of every tools/call, without being told about
// connhost. A call that carries one (and no MetaToolCallID) takes its
// tool-call id from it; see [RuntimeKeys].
type RuntimeKey struct {
	// Key is the _meta key.
	Key string
	// Runtime names the runtime that sends it, for the audit trail.
	Runtime string
	// SessionEnv is the environment variable in which the runtime names
	// its conversation to the stdio servers it launches, if it does; a
	// call with Key and no MetaSessionID over stdio then runs in that
	// conversation's session (ConversationSession). "" when it names none.
	SessionEnv string
}

// RuntimeKeys are the runtimes' own tool-call id keys connhost accepts.
// Each value is the model API's id of the tool call (Anthropic's
// "toolu_…"), which is random and unique across sessions, so a call that
// names no session (no MetaSessionID) needs no session to tell it from
// another: it runs in the session of the conversation the runtime names
// (RuntimeKey.SessionEnv, over stdio), else in the session of its MCP
// connection (DefaultSession), else (a stateless request) in a session of
// its own (CallSession), so that one conversation's calls neither
// count as duplicates of another's nor are fenced by another's uncertain
// call. A retry of the same call carries the same id again.
//
// Claude Code sends the id as "claudecode/toolUseId" and, since v2.1.154,
// gives the stdio servers it launches its session id in
// CLAUDE_CODE_SESSION_ID (the id as the server was launched: a server
// outlives a /clear, and a resumed conversation keeps its id). Over HTTP
// it names no conversation: no header or _meta key of its MCP requests
// does, and Mcp-Session-Id is per connection.
//
// Other runtimes send a session or thread id in _meta but no id of the
// tool call (Codex: "threadId", OpenCode: "ai.opencode/sessionID"); a
// session alone cannot tell a retry from a new call, so those keys are not
// read.
var RuntimeKeys = []RuntimeKey{
	{Key: "claudecode/toolUseId", Runtime: "Claude Code", SessionEnv: "CLAUDE_CODE_SESSION_ID"},
}

// DefaultSession is the session of a call whose tool-call id came from a
// RuntimeKey and that named no session, when the runtime names no
// conversation either: "default:", the principal's name (over stdio,
// Options.Actor), ":" and the MCP connection (the Mcp-Session-Id over
// HTTP, a random id per process over stdio; stateless 2026-07-28 requests
// have no connection, and share the server process's id). A recovery_required call
// fences it, as it fences any session: the calls of that connection then
// wait for the operator, and other connections' calls do not. A client
// that reconnects starts another session: the same runtime id sent over a
// new connection is another execution (Claude Code is not known to send a
// call again after a reconnect: it reports the failure to the model).
func DefaultSession(principal, connection string) string {
	return "default:" + principal + ":" + connection
}

// CallSession is the session of a call whose tool-call id came from a
// RuntimeKey, that named no session and came in a stateless request (no
// conversation, no connection): "call:", the principal's name, ":" and
// the tool-call id. The call is alone in it: its retries (the same id)
// find it, no other call is held as its duplicate, and its fence, if it
// becomes recovery_required, stops no other call.
func CallSession(principal, toolCallID string) string {
	return "call:" + principal + ":" + toolCallID
}

// ConversationSession is the session of a call whose tool-call id came
// from a RuntimeKey and that named no session, in the conversation the
// runtime named (RuntimeKey.SessionEnv): "conversation:", the principal's
// name, ":" and the runtime's conversation id.
func ConversationSession(principal, conversation string) string {
	return "conversation:" + principal + ":" + conversation
}

// identity is a call's resolved identity.
type identity struct {
	Namespace  string   `json:"ns,omitempty"`
	SessionID  string   `json:"s"`
	ToolCallID string   `json:"t"`
	Resumed    bool     `json:"r,omitempty"`
	Kind       Identity `json:"k"`
	// Source says where the ids came from, in the words of the audit
	// trail (see identity.note).
	Source string `json:"src,omitempty"`
}

// errMeta reports a malformed identity in _meta.
var errMeta = errors.New("mcpserver: bad _meta identity")

// identityOf resolves a call's identity: from _meta when the client passed
// it (connhost's keys, or a runtime's own tool-call id key), else from the
// signed request state of a multi-round-trip retry, else made up for this
// request alone.
func (s *Server) identityOf(req *mcp.CallToolRequest, st *requestState, who caller) (identity, error) {
	meta := req.Params.Meta
	str := func(key string) (string, bool, error) {
		v, ok := meta[key]
		if !ok || v == nil {
			return "", false, nil
		}
		sv, isStr := v.(string)
		if !isStr {
			return "", false, fmt.Errorf("%w: _meta %q must be a string, got %s", errMeta, key, jsonType(v))
		}
		return sv, true, nil
	}
	sess, hasSess, err1 := str(MetaSessionID)
	call, hasCall, err2 := str(MetaToolCallID)
	ns, _, err3 := str(MetaNamespace)
	if err := errors.Join(err1, err2, err3); err != nil {
		return identity{}, err
	}
	var rk RuntimeKey
	rcall, hasRuntime := "", false
	for _, k := range RuntimeKeys {
		v, ok, err := str(k.Key)
		if err != nil {
			return identity{}, err
		}
		if ok && !hasRuntime {
			rk, rcall, hasRuntime = k, v, true
		}
	}
	resumed := false
	if v, ok := meta[MetaResumed]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return identity{}, fmt.Errorf("%w: _meta %q must be a boolean, got %s", errMeta, MetaResumed, jsonType(v))
		}
		resumed = b
	}
	switch {
	case hasCall && hasSess:
		return identity{Namespace: ns, SessionID: sess, ToolCallID: call, Resumed: resumed, Kind: IdentityClient,
			Source: fmt.Sprintf("_meta %s and %s", MetaSessionID, MetaToolCallID)}, nil
	case hasCall:
		return identity{}, fmt.Errorf("%w: pass _meta %q and %q together: a tool-call id is unique within its session only", errMeta, MetaSessionID, MetaToolCallID)
	case hasRuntime:
		id := identity{Namespace: ns, SessionID: sess, ToolCallID: rcall, Resumed: resumed, Kind: IdentityRuntime}
		switch conv, hasConv := who.conversation(rk); {
		case hasSess:
			id.Source = fmt.Sprintf("_meta %s (%s's tool-call id) and %s", rk.Key, rk.Runtime, MetaSessionID)
		case hasConv:
			id.SessionID = ConversationSession(who.actor, conv)
			id.Source = fmt.Sprintf("_meta %s (%s's tool-call id, unique across sessions) in the session of %s's conversation %s (%s)",
				rk.Key, rk.Runtime, rk.Runtime, conv, rk.SessionEnv)
		case req.Session.ID() == "" && !who.stdio:
			// A stateless request (2026-07-28 over HTTP) has no
			// connection either: the call is a session of its own.
			id.SessionID = CallSession(who.actor, rcall)
			id.Source = fmt.Sprintf("_meta %s (%s's tool-call id, unique across sessions) in a session of its own (a stateless request of %s; %s names no conversation)",
				rk.Key, rk.Runtime, who.actor, rk.Runtime)
		default:
			id.SessionID = DefaultSession(who.actor, s.connection(req))
			id.Source = fmt.Sprintf("_meta %s (%s's tool-call id, unique across sessions) in the session of this MCP connection of %s (%s names no conversation)",
				rk.Key, rk.Runtime, who.actor, rk.Runtime)
		}
		return id, nil
	case hasSess:
		return identity{}, fmt.Errorf("%w: pass _meta %q and %q together (or a runtime's own tool-call id key): with a session only, a retry could not be told from a new call", errMeta, MetaSessionID, MetaToolCallID)
	case resumed:
		return identity{}, fmt.Errorf("%w: _meta %q needs %q and %q: a call made up for one request cannot be resumed", errMeta, MetaResumed, MetaSessionID, MetaToolCallID)
	case st != nil:
		return st.ID, nil
	}
	conn := s.connection(req)
	if req.Session.ID() == "" && !who.stdio {
		// A stateless request (2026-07-28 over HTTP) has no connection:
		// the process's own id would put every such call of every client
		// in one session, where one client's call is held as another's
		// duplicate and one's recovery fences all. It is a session of its
		// own.
		conn = "request-" + rand.Text()[:16]
	}
	return identity{Namespace: ns, SessionID: "mcp:" + conn, ToolCallID: "mcp-req:" + rand.Text(), Kind: IdentityPerRequest,
		Source: "made up for this request"}, nil
}

// connection names the MCP connection req came over in derived session
// ids: its Mcp-Session-Id, or this server's own id for a connection
// without one (stdio).
func (s *Server) connection(req *mcp.CallToolRequest) string {
	if id := req.Session.ID(); id != "" {
		return id
	}
	return s.conn
}

// note is what the audit trail records about where the identity came
// from (the first event's reason).
func (id identity) note(policy PerRequestPolicy) string {
	switch id.Kind {
	case IdentityPerRequest:
		n := perRequestNote
		if policy == PerRequestAllow {
			n += "; the deployment allows per-request identity ([mcp] allow_per_request_identity)"
		}
		return n
	case "":
		return ""
	}
	return "mcp: identity from " + id.Source
}

func jsonType(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// perRequestNote is recorded in the audit trail of a call whose identity
// was made up for its request.
const perRequestNote = "mcp: the client passed no " + MetaSessionID + "/" + MetaToolCallID +
	" in _meta; identity derived for this request only (a client retry after a disconnect is a new call)"

// CodeIdentityRequired is the problem code of a side-effecting call
// refused because it carried no stable identity (PerRequestRefuse).
const CodeIdentityRequired httpapi.Code = "identity_required"

// RecipeRef points an integrator at the runtime recipes.
const RecipeRef = "docs/runtimes.md (identity and the runtime recipes; clients/js for @openai/agents and LangChain)"

// identityRequired is the refusal of a side-effecting call without a
// stable identity.
func identityRequired(tool string) *httpapi.Problem {
	// MCP's own problem (the HTTP API requires the ids in every call):
	// httpapi.NewProblem knows only the API's codes.
	return &httpapi.Problem{Type: httpapi.ProblemTypePrefix + string(CodeIdentityRequired), Title: "Identity required",
		Status: http.StatusUnprocessableEntity, Code: CodeIdentityRequired, Detail: fmt.Sprintf(
			"%s has effects, and this server runs such a tool only for a runtime that passes the call's identity: "+
				"_meta %q (the session) and %q (the model's tool-call id), or a runtime's own tool-call id key (%s). "+
				"Without it a retry after a crash could not be recognised and could act twice. Nothing was done. "+
				"Integrators: see %s, or allow per-request identity with [mcp] allow_per_request_identity = true",
			tool, MetaSessionID, MetaToolCallID, runtimeKeyList(), RecipeRef)}
}

func runtimeKeyList() string {
	s := ""
	for i, k := range RuntimeKeys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q from %s", k.Key, k.Runtime)
	}
	return s
}
