package mcpserver

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/host"
)

// Request states. From protocol 2026-07-28 the server asks the client's
// user to approve a gated call by answering the tools/call with an input
// request and an opaque requestState, which the client echoes with the
// user's answer in a new tools/call: no connection, session or process
// has to last between the two. The state is therefore all the server
// knows of the question when the answer comes, and the client holds it:
//
//   - It is signed (HMAC-SHA256) with a key derived from the credential of
//     the principal it was issued to (stateKey of its bearer token), so
//     every node of a fleet and a restarted server verify it (they read
//     the same principals), nobody who holds only the database's
//     credentials can make one, and one principal's state does not verify
//     for another. A connection without a token (stdio) uses a key of the
//     process: its client reconnects to a new process anyway.
//   - It names the call (identity, execution, approval, argument digest)
//     and the principal it was issued to: presented with another call or
//     by another principal it is refused, and so is a forged or altered
//     one (a JSON-RPC invalid params error; nothing is done).
//   - It carries a random nonce, which the decision records with the
//     approval in the ledger (host.Decision.StateNonce): the ledger
//     refuses a second decision through it, so a replayed answer approves
//     nothing (the specification leaves single use to the server). A
//     dismissed dialog records nothing and consumes nothing.

// requestState is the content of a request state.
type requestState struct {
	// ID is the call's identity, a made-up one included (or the retry
	// would be another call).
	ID identity `json:"id"`
	// Execution, Approval and Digest name the execution, its approval
	// and the argument digest the user is shown.
	Execution string `json:"x"`
	Approval  string `json:"a"`
	Digest    string `json:"d"`
	// Principal is who was asked (caller.actor).
	Principal string `json:"p"`
	// Nonce makes the state single-use (see host.Decision.StateNonce).
	Nonce string `json:"n"`
}

// stateKeyInfo is the HKDF info of request-state keys, and the first
// line of every MAC.
const stateKeyInfo = "connhost mcp request state v1"

// maxStateBytes caps a request state the server reads.
const maxStateBytes = 4096

// stateKey returns the key of the request states issued to the principal
// whose bearer token this is: 32 bytes of HKDF-SHA256(token, info
// "connhost mcp request state v1"). Rotating the token rotates the key
// (and refuses the states issued before).
func stateKey(token string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(token), nil, stateKeyInfo, 32)
	if err != nil {
		panic(err) // only for lengths beyond 255 hash sizes
	}
	return k
}

// newNonce returns a fresh request-state nonce.
func newNonce() string { return rand.Text() }

// signState returns st signed with key: base64url(JSON) "." base64url(MAC).
func signState(key []byte, st requestState) string {
	b, _ := json.Marshal(st)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(stateMAC(key, b))
}

func stateMAC(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(stateKeyInfo + "\n"))
	m.Write(b)
	return m.Sum(nil)
}

// errState is the refusal of a request state the server did not issue
// for this caller (forged, altered, or signed with another key).
var errState = errors.New("mcpserver: request state refused")

// openState returns the request state v names if key signed it, else an
// error wrapping errState that says why.
func openState(key []byte, v string) (*requestState, error) {
	if len(v) > maxStateBytes {
		return nil, fmt.Errorf("%w: %d bytes, longer than any this server issues", errState, len(v))
	}
	p, sig, ok := strings.Cut(v, ".")
	if !ok {
		return nil, fmt.Errorf("%w: not a request state of this server", errState)
	}
	// Strict: the unused bits of the last character must be zero, so
	// that one state has one spelling.
	b, err1 := base64.RawURLEncoding.Strict().DecodeString(p)
	mac, err2 := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: not a request state of this server", errState)
	}
	if !hmac.Equal(mac, stateMAC(key, b)) {
		return nil, fmt.Errorf("%w: its signature does not verify with the key of this principal: it was altered, forged, issued to another principal, or issued before the principal's token changed", errState)
	}
	var st requestState
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || dec.More() || st.ID.SessionID == "" || st.ID.ToolCallID == "" ||
		st.Execution == "" || st.Approval == "" || st.Nonce == "" {
		return nil, fmt.Errorf("%w: signed, but not a request state this release reads", errState)
	}
	return &st, nil
}

// stateProblem is the JSON-RPC error of a tools/call whose request state
// is refused: a protocol problem, answered before anything is recorded
// or decided.
func stateProblem(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: requestState: " +
		strings.TrimPrefix(err.Error(), errState.Error()+": ") +
		"; nothing was done or decided. Send the call again without requestState and inputResponses to be asked again."}
}

// stateOf returns the request state of a tools/call (nil without one),
// or why it is refused: not signed for this caller, or issued to another
// principal.
func (s *Server) stateOf(req *mcp.CallToolRequest, who caller) (*requestState, error) {
	v := req.Params.RequestState
	if v == "" {
		return nil, nil
	}
	st, err := openState(who.stateKey, v)
	if err != nil {
		return nil, err
	}
	if st.Principal != who.actor {
		return nil, fmt.Errorf("%w: it was issued to %q, and %q presents it", errState, st.Principal, who.actor)
	}
	return st, nil
}

// belongsTo refuses a request state presented with another call than the
// one it was issued for.
func (st *requestState) belongsTo(id identity) error {
	if st == nil || st.ID.Namespace == id.Namespace && st.ID.SessionID == id.SessionID && st.ID.ToolCallID == id.ToolCallID {
		return nil
	}
	return fmt.Errorf("%w: it was issued for another call (execution %s), not for session %q, tool-call id %q",
		errState, st.Execution, id.SessionID, id.ToolCallID)
}

// stateNote is what the model should know when a tools/call answers an
// approval request that is no longer pending: its own answer recorded
// before (a replay, which decided nothing), or a decision made elsewhere
// first (the answer was not recorded). "" when the call carried no answer.
func stateNote(req *mcp.CallToolRequest, st *requestState, res host.Result) string {
	if st == nil || res.Status == host.StatusAwaitingApproval || res.Approval == nil || res.ExecutionID != st.Execution {
		return ""
	}
	if _, answered := req.Params.InputResponses[approvalInput]; !answered {
		return ""
	}
	ap := res.Approval
	if ap.StateNonce == st.Nonce {
		return usedNote(fmt.Sprintf("its answer was recorded (%s by %s at %s)", ap.Decision, ap.By, ap.DecidedAt.UTC().Format(time.RFC3339)))
	}
	return fmt.Sprintf("the approval was decided before this answer arrived (%s by %s); the answer was not recorded", ap.Decision, ap.By)
}

// usedNote says that a request state was used already.
func usedNote(what string) string {
	return "this requestState was used already: " + what + "; nothing was decided or done again"
}
