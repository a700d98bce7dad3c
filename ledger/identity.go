package ledger

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// DefaultNamespace is the namespace of calls that do not name one.
const DefaultNamespace = "default"

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

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

func digest32(parts ...string) string {
	h := sha256.New()
	var n [4]byte
	for _, p := range parts {
		l := len(p)
		n[0], n[1], n[2], n[3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		h.Write(n[:])
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	// 20 bytes = 160 bits, 32 base32 characters.
	return strings.ToLower(idEncoding.EncodeToString(sum[:20]))
}
