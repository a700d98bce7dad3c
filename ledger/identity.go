package ledger

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// DefaultNamespace is the namespace of calls that do not name one.
const DefaultNamespace = "default"

// idEncoding is base32 (RFC 4648) in lower case, without padding.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ExecutionID derives the execution id of a tool call. It is a pure
// function of (namespace, session id, tool-call id), so a live turn and a
// durable resume of the same call name the same execution. Each component is
// length-prefixed before hashing, so no choice of ids can collide with
// another by moving a separator.
func ExecutionID(namespace, sessionID, toolCallID string) string {
	return "ex_" + digest32("connhost/execution/v1", namespace, sessionID, toolCallID)
}

// IdempotencyKey derives the key handed to a connector for an execution,
// scoped to the namespace and the connector: the same execution id under
// another connector or namespace yields another key.
func IdempotencyKey(namespace, connector, executionID string) string {
	return "ck_" + digest32("connhost/idempotency-key/v1", namespace, connector, executionID)
}

// ApprovalID names an execution's approval request. An execution has at
// most one approval (other arguments are another intent), so the approval id
// is the execution id under another prefix and needs no index.
func ApprovalID(executionID string) string {
	return "ap_" + strings.TrimPrefix(executionID, "ex_")
}

// ExecutionIDOfApproval is the inverse of ApprovalID; ok is false when id
// is not an approval id.
func ExecutionIDOfApproval(id string) (executionID string, ok bool) {
	rest, ok := strings.CutPrefix(id, "ap_")
	if !ok || rest == "" {
		return "", false
	}
	return "ex_" + rest, true
}

// IntentKey is the key under which the duplicate-intent guard finds the
// records of one intent: the sha256 of (namespace, session, connector,
// operation, intent digest), each length-prefixed, where the intent
// digest is rec.IntentDigest, or the argument digest when it is empty.
// Every backend indexes guarded records by it (see Record.DuplicateWindow).
func IntentKey(rec Record) [32]byte {
	h := sha256.New()
	var l [4]byte
	label, intent := "connhost/intent/v1", rec.ArgsDigest
	if rec.IntentDigest != "" {
		// Its own label: no argument digest can stand for an intent
		// digest.
		label, intent = "connhost/intent/v2", rec.IntentDigest
	}
	for _, p := range [...]string{label, rec.Namespace, rec.SessionID, rec.Connector, rec.Operation, intent} {
		n := len(p)
		l[0], l[1], l[2], l[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		h.Write(l[:])
		h.Write([]byte(p))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// CountsAsRepeated reports whether rec, an earlier record of a guarded
// intent, makes a new call of the intent a possible duplicate: it
// succeeded, or it is still in flight (not terminal). A failed, rejected,
// expired, abandoned or cancelled call did nothing, so repeating it is
// what the runtime should do.
func CountsAsRepeated(rec Record) bool {
	return rec.State == StateSucceeded || !rec.State.Terminal()
}

// MaxRepeatCandidates bounds how many counting records of an intent a
// guarded Create reads to find the one it repeats: the earliest that is
// not itself a held or answered duplicate (DuplicateOf empty), else the
// earliest of them.
const MaxRepeatCandidates = 32

func digest32(domain, a, b, c string) string {
	// One stack buffer for the common sizes; longer ids spill to the heap.
	var buf [256]byte
	in := buf[:0]
	for _, p := range [...]string{domain, a, b, c} {
		l := len(p)
		in = append(in, byte(l>>24), byte(l>>16), byte(l>>8), byte(l))
		in = append(in, p...)
	}
	sum := sha256.Sum256(in)
	// 20 bytes = 160 bits, 32 base32 characters.
	var out [32]byte
	idEncoding.Encode(out[:], sum[:20])
	return string(out[:])
}
