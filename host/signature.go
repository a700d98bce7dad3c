package host

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/connhost/connhost/ledger"
)

// Signed approvals. A reviewer's decision is signed with a key derived
// from the credential that made it (ApprovalKey of the principal's token),
// over what the decision authorises: the execution, its tool, its
// idempotency key, the argument digest, the policy version, the expiry,
// the reviewer and the decision. On a shared ledger (ledger.Fleet) a
// gated call is dispatched only when its approval verifies with the key
// Options.ApprovalKeys holds for the reviewer it names, and its recorded
// arguments still have the signed digest: whoever can write the database
// but holds no approver's token (the connection string every node has, a
// copy of the data) can neither make an approval nor edit one into
// another call's or other arguments'. See RATIONALE.md, "Why are
// approvals signed with a key derived from the approver's token?" and
// "Why does only a shared ledger verify approvals?".

// approvalKeyInfo is the HKDF info of approval keys.
const approvalKeyInfo = "connhost approval v1"

// signaturePrefix starts every signature: the scheme, then the key id and
// the MAC.
const signaturePrefix = "hmac-sha256:"

// ApprovalKey returns the key that signs and verifies the decisions of
// the principal whose bearer token this is: 32 bytes of
// HKDF-SHA256(token, info "connhost approval v1"). Every node of a fleet
// derives the same key from the same configuration; rotating the token
// rotates the key.
func ApprovalKey(token string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(token), nil, approvalKeyInfo, 32)
	if err != nil {
		panic(err) // only for lengths beyond 255 hash sizes
	}
	return k
}

// keyID names a key in signatures and messages without revealing it.
func keyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("key id"))
	return hex.EncodeToString(m.Sum(nil)[:4])
}

// approvalMAC is the MAC of approval a of rec under key.
func approvalMAC(key []byte, rec ledger.Record, a ledger.Approval) []byte {
	m := hmac.New(sha256.New, key)
	for _, part := range []string{approvalKeyInfo, rec.ID, a.ID, rec.Namespace, rec.SessionID, rec.ToolCallID,
		rec.Connector, rec.Operation, rec.IdempotencyKey, a.ArgsDigest, a.PolicyVersion,
		a.ExpiresAt.UTC().Format(time.RFC3339Nano), string(a.Decision), a.By} {
		// Length-prefixed: no two sequences of parts encode alike.
		fmt.Fprintf(m, "%d:%s\n", len(part), part)
	}
	return m.Sum(nil)
}

// signApproval returns a's signature under key: "hmac-sha256:<key
// id>:<mac>".
func signApproval(key []byte, rec ledger.Record, a ledger.Approval) string {
	return signaturePrefix + keyID(key) + ":" + hex.EncodeToString(approvalMAC(key, rec, a))
}

// unverified returns why rec's approval does not authorise a dispatch of
// it on a shared ledger, or "" when it does: it names a reviewer whose key
// this executor holds, is approved, carries a signature that key made
// over this record's values, and the record's arguments still have the
// approved digest.
func (e *Executor) unverified(rec ledger.Record) string {
	why, _ := e.verify(rec)
	return why
}

// verify is unverified, and also reports whether the reason is only this
// node's configuration (unconfigured): the reviewer the approval names
// has no key here, or may not review the call's namespace here. A node
// whose configuration lags the others' (a rolling change that adds an
// approver, or a namespace to one) cannot tell their valid approval from
// a forged one, and must not end the call for it: it leaves the call as
// it is, and a node whose configuration says otherwise decides it.
func (e *Executor) verify(rec ledger.Record) (why string, unconfigured bool) {
	a := rec.Approval
	if a == nil {
		return "the operation requires approval and the record holds none", false
	}
	if a.Decision != ledger.ApprovalApproved {
		return fmt.Sprintf("its approval %s is %s, not approved", a.ID, a.Decision), false
	}
	if e.now().After(a.ExpiresAt.Add(ConsumedRetention)) {
		return fmt.Sprintf("approval %s expired at %s, more than %s ago: the journal of consumed approvals keeps a dispatch that long, so a dispatch of it now could not be told from a repeat", a.ID, a.ExpiresAt.UTC().Format(time.RFC3339), ConsumedRetention), false
	}
	if _, digest, err := parseArgs(rec.Args); err != nil || digest != a.ArgsDigest || digest != rec.ArgsDigest {
		return fmt.Sprintf("its recorded arguments do not have the approved digest %s", short(a.ArgsDigest)), false
	}
	if !e.reviews(a.By, rec.Namespace) {
		return fmt.Sprintf("approval %s names %s, who reviews the calls of namespace %s only, not of namespace %q: a reviewer's token approves nothing outside the reviewer's namespaces", a.ID, a.By, quoteList(e.opts.ApprovalNamespaces[a.By]), rec.Namespace), true
	}
	key, ok := e.opts.ApprovalKeys[a.By]
	if !ok {
		return fmt.Sprintf("approval %s names %q, which is no approver of this node's configuration: only a principal's token signs an approval", a.ID, a.By), true
	}
	kid, mac, ok := parseSignature(a.Signature)
	switch {
	case a.Signature == "":
		return fmt.Sprintf("approval %s by %s carries no signature: it was not made with %s's token (a decision written into the ledger directly)", a.ID, a.By, a.By), false
	case !ok:
		return fmt.Sprintf("approval %s by %s carries a malformed signature", a.ID, a.By), false
	case !hmac.Equal(mac, approvalMAC(key, rec, *a)):
		if cur := keyID(key); kid != cur {
			return fmt.Sprintf("approval %s by %s was signed with key %s, and %s's key is now %s: the token was rotated since, or the approval was not made with it; approve a new call", a.ID, a.By, kid, a.By, cur), false
		}
		return fmt.Sprintf("approval %s by %s does not verify with %s's key: the record was changed after it was approved", a.ID, a.By, a.By), false
	}
	return "", false
}

// reviews reports whether reviewer decides in namespace ns
// (Options.ApprovalNamespaces).
func (e *Executor) reviews(reviewer, ns string) bool {
	nss := e.opts.ApprovalNamespaces[reviewer]
	return len(nss) == 0 || slices.Contains(nss, ns)
}

// parseSignature splits a signature into its key id and MAC.
func parseSignature(s string) (kid string, mac []byte, ok bool) {
	rest, ok := strings.CutPrefix(s, signaturePrefix)
	if !ok {
		return "", nil, false
	}
	kid, h, ok := strings.Cut(rest, ":")
	if !ok {
		return "", nil, false
	}
	mac, err := hex.DecodeString(h)
	if err != nil || len(mac) != sha256.Size {
		return "", nil, false
	}
	return kid, mac, true
}

// gatedOnShared reports whether a dispatch of rec needs a verified
// approval: its operation requires approval (as loaded now, not as the
// record says) and the ledger is shared.
func (e *Executor) gatedOnShared(op *operation) bool {
	return e.shared && op != nil && op.op.RequiresApproval
}
