package mcpserver

import (
	"crypto/rand"
	"testing"
)

// TestRequestStateRoundTrip: a state signed by a server verifies there
// and nowhere else, and any change to it is refused.
func TestRequestStateRoundTrip(t *testing.T) {
	a, b := &Server{}, &Server{}
	_, _ = rand.Read(a.key[:])
	_, _ = rand.Read(b.key[:])
	st := requestState{ID: identity{SessionID: "mcp:x", ToolCallID: "mcp-req:y", Kind: IdentityPerRequest}, Approval: "ap_1", Digest: "d"}
	v := a.signState(st)
	got := a.verifyState(v)
	if got == nil || *got != st {
		t.Fatalf("round trip: %+v", got)
	}
	if b.verifyState(v) != nil {
		t.Fatal("another server's key verified the state")
	}
	for i := range v {
		for _, bit := range []byte{1, 2, 4, 8, 16, 32} {
			m := []byte(v)
			m[i] ^= bit
			if a.verifyState(string(m)) != nil {
				t.Fatalf("state changed at byte %d (bit %d) verified", i, bit)
			}
		}
	}
}

// FuzzVerifyState: the client echoes request state back, so verifyState
// decodes untrusted bytes: it never panics, and accepts only what the
// server signed.
func FuzzVerifyState(f *testing.F) {
	s := &Server{}
	_, _ = rand.Read(s.key[:])
	f.Add(s.signState(requestState{ID: identity{SessionID: "s", ToolCallID: "c", Kind: IdentityClient}, Approval: "ap", Digest: "d"}))
	f.Add("")
	f.Add(".")
	f.Add("e30.AAAA")
	f.Fuzz(func(t *testing.T, v string) {
		st := s.verifyState(v)
		if st == nil {
			return
		}
		if s.verifyState(s.signState(*st)) == nil {
			t.Fatalf("a verified state does not verify once signed again: %q", v)
		}
	})
}
