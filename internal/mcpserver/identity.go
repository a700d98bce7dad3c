package mcpserver

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/internal/httpapi"
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
}

// RuntimeKeys are the runtimes' own tool-call id keys connhost accepts.
// Each value is the model API's id of the tool call (Anthropic's
// "toolu_…"), which is random and unique across sessions, so a call that
// names no session (no MetaSessionID) runs in its principal's default
// session (see DefaultSession): the id alone tells two calls apart, and a
// retry of the same call carries the same id again.
//
// Other runtimes send a session or thread id in _meta but no id of the
// tool call (Codex: "threadId", OpenCode: "ai.opencode/sessionID"); a
// session alone cannot tell a retry from a new call, so those keys are not
// read.
var RuntimeKeys = []RuntimeKey{
	{Key: "claudecode/toolUseId", Runtime: "Claude Code"},
}

// DefaultSession is the session of a call whose tool-call id came from a
// RuntimeKey and that named no session: "default:" and the principal's
// name (over stdio, Options.Actor). A recovery_required call fences it,
// as it fences any session: every such call of the principal then waits
// for the operator.
func DefaultSession(principal string) string { return "default:" + principal }

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
		if hasSess {
			id.Source = fmt.Sprintf("_meta %s (%s's tool-call id) and %s", rk.Key, rk.Runtime, MetaSessionID)
		} else {
			id.SessionID = DefaultSession(who.actor)
			id.Source = fmt.Sprintf("_meta %s (%s's tool-call id, unique across sessions) in the default session of %s", rk.Key, rk.Runtime, who.actor)
		}
		return id, nil
	case hasSess:
		return identity{}, fmt.Errorf("%w: pass _meta %q and %q together (or a runtime's own tool-call id key): with a session only, a retry could not be told from a new call", errMeta, MetaSessionID, MetaToolCallID)
	case resumed:
		return identity{}, fmt.Errorf("%w: _meta %q needs %q and %q: a call made up for one request cannot be resumed", errMeta, MetaResumed, MetaSessionID, MetaToolCallID)
	case st != nil:
		return st.ID, nil
	}
	conn := req.Session.ID()
	if conn == "" {
		conn = s.conn
	}
	return identity{Namespace: ns, SessionID: "mcp:" + conn, ToolCallID: "mcp-req:" + rand.Text(), Kind: IdentityPerRequest,
		Source: "made up for this request"}, nil
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
const RecipeRef = "README.md, section \"MCP\" (runtime recipes; clients/js for @openai/agents and LangChain)"

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
