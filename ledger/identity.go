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
