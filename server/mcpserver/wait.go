package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The _meta keys of a tools/call with which a runtime settles a call of
// its saved state and waits for a reviewer's decision (beside the ids;
// see MetaSessionID).
const (
	// MetaSettle (a boolean) drives the recorded execution of the call's
	// ids as a re-send of the same call does (host.ToolCall.Settle), but
	// when connhost has no record of them it runs nothing: it records the
	// ids as cancelled ("never reached connhost; it did not run"), so that
	// the original request, if it arrives late, never runs either. It
	// needs MetaSessionID and MetaToolCallID (or a runtime's own key).
	MetaSettle = "io.connhost/settle"
	// MetaWait (a number of seconds, at least 0) holds a call that is, or
	// becomes, awaiting_approval open until a reviewer decides (console,
	// connhost approve, the HTTP API), up to that long, capped by
	// Options.ApprovalWait and the approval's expiry: approved, the call
	// runs in the same request and the answer is its outcome; rejected or
	// expired, the answer says so. Still undecided, it answers
	// awaiting_approval. A client that gave a progress token is sent a
	// progress notification every 5 seconds meanwhile.
	MetaWait = "io.connhost/wait"
)

// errMetaValue reports a malformed MetaSettle or MetaWait.
var errMetaValue = errors.New("mcpserver: bad _meta value")

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	if _, ok := v.(string); ok {
		return "a string"
	}
	return jsonType(v)
}

// maxWaitSeconds bounds the seconds of MetaWait that are converted (the
// hold is capped by Options.ApprovalWait anyway).
const maxWaitSeconds = 365 * 24 * 3600

// callOptions are what a tools/call asks with MetaSettle and MetaWait.
type callOptions struct {
	settle bool
	// wait is MetaWait; waitSet says whether the call gave it.
	wait    time.Duration
	waitSet bool
}

// callOptionsOf reads MetaSettle and MetaWait from meta, strictly: a
// value of another type, or a negative wait, is an error that names the
// key (the call is refused, nothing is done). A key given as null is
// absent, as for the ids.
func callOptionsOf(meta mcp.Meta) (callOptions, error) {
	var co callOptions
	if v, ok := meta[MetaSettle]; ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return co, fmt.Errorf("%w: _meta %q must be a boolean, got %s", errMetaValue, MetaSettle, jsonKind(v))
		}
		co.settle = b
	}
	if v, ok := meta[MetaWait]; ok && v != nil {
		var secs float64
		switch n := v.(type) {
		case float64:
			secs = n
		case json.Number:
			f, err := n.Float64()
			if err != nil {
				return co, fmt.Errorf("%w: _meta %q must be a number of seconds, got %q", errMetaValue, MetaWait, n)
			}
			secs = f
		default:
			return co, fmt.Errorf("%w: _meta %q must be a number of seconds, got %s", errMetaValue, MetaWait, jsonKind(v))
		}
		if secs < 0 || math.IsNaN(secs) {
			return co, fmt.Errorf("%w: _meta %q must be a number of seconds of at least 0, got %v", errMetaValue, MetaWait, secs)
		}
		co.wait, co.waitSet = time.Duration(math.Min(secs, maxWaitSeconds)*float64(time.Second)), true
	}
	return co, nil
}

// check refuses options that the call's identity cannot honour: a call
// with an identity of its own request has no record to settle.
func (co callOptions) check(id identity) error {
	if co.settle && id.Kind == IdentityPerRequest {
		return fmt.Errorf("%w: _meta %q needs the call's ids (%q and %q, or a runtime's own tool-call id key): a call made up for one request has nothing to settle",
			errMetaValue, MetaSettle, MetaSessionID, MetaToolCallID)
	}
	return nil
}

// holdFor is how long a call awaiting approval is held open for the
// decision: what the client asked with MetaWait, capped by
// Options.ApprovalWait; without it, Options.ApprovalWait for a call with
// an identity of its own request (no retry could find its approval again)
// unless it is answered with a task; else not at all. A negative
// Options.ApprovalWait never holds.
func (s *Server) holdFor(ctx context.Context, id identity, co callOptions) time.Duration {
	switch {
	case s.opts.ApprovalWait <= 0:
		return 0
	case co.waitSet:
		return min(co.wait, s.opts.ApprovalWait)
	case id.Kind == IdentityPerRequest && !answersWithTask(ctx):
		return s.opts.ApprovalWait
	}
	return 0
}
