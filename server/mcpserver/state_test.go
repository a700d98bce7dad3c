package mcpserver

import (
	"errors"
	"testing"
)

// TestRequestStateRoundTrip: a state signed with a principal's key
// verifies with that key and no other (another principal's, another
// token of the same principal), and any change to it is refused.
func TestRequestStateRoundTrip(t *testing.T) {
	rita, olga := stateKey("tok-rita"), stateKey("tok-olga")
	st := requestState{ID: identity{SessionID: "mcp:x", ToolCallID: "mcp-req:y", Kind: IdentityPerRequest},
		Execution: "ex_1", Approval: "ap_1", Digest: "d", Principal: "rita", Nonce: "n"}
	v := signState(rita, st)
	got, err := openState(rita, v)
	if err != nil || *got != st {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := openState(stateKey("tok-rita"), v); err != nil {
		t.Fatalf("the same token's key, derived again (a restarted server, another node): %v", err)
	}
	for name, key := range map[string][]byte{"another principal": olga, "a rotated token": stateKey("tok-rita-2")} {
		if _, err := openState(key, v); !errors.Is(err, errState) {
			t.Fatalf("%s verified the state: %v", name, err)
		}
	}
	for i := range v {
		for _, bit := range []byte{1, 2, 4, 8, 16, 32} {
			m := []byte(v)
			m[i] ^= bit
			if _, err := openState(rita, string(m)); err == nil {
				t.Fatalf("state changed at byte %d (bit %d) verified", i, bit)
			}
		}
	}
}

// FuzzOpenState: the client echoes request state back, so openState
// decodes untrusted bytes: it never panics, and accepts only what the
// key signed.
func FuzzOpenState(f *testing.F) {
	key := stateKey("tok")
	f.Add(signState(key, requestState{ID: identity{SessionID: "s", ToolCallID: "c", Kind: IdentityClient},
		Execution: "ex", Approval: "ap", Digest: "d", Principal: "p", Nonce: "n"}))
	f.Add("")
	f.Add(".")
	f.Add("e30.AAAA")
	f.Fuzz(func(t *testing.T, v string) {
		st, err := openState(key, v)
		if err != nil {
			return
		}
		if _, err := openState(key, signState(key, *st)); err != nil {
			t.Fatalf("a verified state does not verify once signed again: %q: %v", v, err)
		}
	})
}
