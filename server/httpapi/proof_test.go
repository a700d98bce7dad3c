package httpapi

import (
	"strings"
	"testing"
)

// TestSameServer: the URL a client dialled matches a URL the proof signs
// when scheme, port and path agree and the host is the same, ignoring
// case, or both are loopback; anything else is another server.
func TestSameServer(t *testing.T) {
	signed := []string{"https://connhost.example.com", "http://127.0.0.1:8420"}
	for _, tc := range []struct {
		dialled string
		same    bool
	}{
		{"https://connhost.example.com", true},
		{"https://CONNHOST.example.com:443/", true},
		{"http://127.0.0.1:8420", true},
		{"http://localhost:8420", true},
		{"http://[::1]:8420", true},
		{"http://127.0.0.2:8420", true},
		{"http://127.0.0.1:9999", false},
		{"https://127.0.0.1:8420", false},
		{"http://connhost.example.com", false},
		{"https://connhost.example.com:8443", false},
		{"https://connhost.example.com/other", false},
		{"https://evil.example", false},
		{"http://192.168.1.5:8420", false},
		{"not a url", false},
	} {
		if got := SameServer(tc.dialled, signed); got != tc.same {
			t.Errorf("SameServer(%q) = %v, want %v", tc.dialled, got, tc.same)
		}
	}
	if SameServer("http://127.0.0.1:8420", nil) {
		t.Error("a proof that signs no URL matched")
	}
}

// TestProofBindsURLs: a version 2 proof covers the server's URLs (one
// made for other URLs, or a version 1 proof, does not verify), and the
// server answers the URLs of Options.URLs.
func TestProofBindsURLs(t *testing.T) {
	const tok, nonce = "tok-rita", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	urls := []string{"http://127.0.0.1:8420"}
	p := ServerProof(tok, nonce, TokenID(tok), "rita", urls)
	if !VerifyServerProof(tok, nonce, "rita", urls, p) {
		t.Fatal("the proof does not verify")
	}
	for _, other := range [][]string{nil, {}, {"http://127.0.0.1:9999"}, {"http://127.0.0.1:8420", "http://127.0.0.1:9999"}} {
		if VerifyServerProof(tok, nonce, "rita", other, p) {
			t.Errorf("the proof for %v verified for %v", urls, other)
		}
	}
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{Principals: testPrincipals(), URLs: urls}).URL}
	var pr ProofResponse
	c.post("/v1/auth/proof", ProofRequest{Nonce: nonce, TokenID: TokenID(tok), Version: ProofVersion}).decode(t, &pr)
	if strings.Join(pr.URLs, " ") != urls[0] || !VerifyServerProof(tok, nonce, "rita", pr.URLs, pr.Proof) {
		t.Errorf("version 2 answer %+v", pr)
	}
	pr = ProofResponse{}
	c.post("/v1/auth/proof", ProofRequest{Nonce: nonce, TokenID: TokenID(tok)}).decode(t, &pr)
	if pr.URLs != nil || !VerifyServerProof(tok, nonce, "rita", nil, pr.Proof) {
		t.Errorf("version 1 answer %+v", pr)
	}
}
