package host

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/connhost/connhost/ledger"
)

// FuzzApprovalSignature: a signature comes from the ledger, which whoever
// holds the database writes. Parsing any string never panics, and an
// approval verifies only with a signature whose MAC is the one rita's key
// makes over the record: never with another, whatever its key id says.
func FuzzApprovalSignature(f *testing.F) {
	key := ApprovalKey("tok-rita-0123456789abcdef")
	rec := ledger.Record{ID: "ex_1", Namespace: "default", SessionID: "s1", ToolCallID: "c1", Connector: "payments",
		Operation: "create_payment", IdempotencyKey: "ck_1", Args: []byte(`{"amount":500}`)}
	_, digest, err := parseArgs(rec.Args)
	if err != nil {
		f.Fatal(err)
	}
	rec.ArgsDigest = digest
	a := ledger.Approval{ID: "ap_1", ArgsDigest: digest, PolicyVersion: "pv", ExpiresAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Decision: ledger.ApprovalApproved, By: "rita"}
	good := signApproval(key, rec, a)
	want := approvalMAC(key, rec, a)
	for _, seed := range []string{good, "", signaturePrefix, signaturePrefix + "k:", signaturePrefix + keyID(key) + ":" + hex.EncodeToString(make([]byte, 32)),
		signaturePrefix + ":" + good[len(signaturePrefix):], "hmac-sha256:a:b:c", good + "00"} {
		f.Add(seed)
	}
	e := &Executor{opts: Options{ApprovalKeys: map[string][]byte{"rita": key}, Now: func() time.Time { return a.ExpiresAt.Add(-time.Hour) }}}
	f.Fuzz(func(t *testing.T, sig string) {
		kid, mac, ok := parseSignature(sig)
		if ok && (len(mac) != len(want) || len(kid) > len(sig)) {
			t.Fatalf("parsed %q into a MAC of %d bytes", sig, len(mac))
		}
		signed := rec
		ap := a
		ap.Signature = sig
		signed.Approval = &ap
		why := e.unverified(signed)
		if verifies := why == ""; verifies != (ok && bytes.Equal(mac, want)) {
			t.Fatalf("signature %q: verifies %t (%s), its MAC is rita's: %t", sig, verifies, why, ok && bytes.Equal(mac, want))
		}
	})
}
