package httpapi

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The server proof: before a client sends a bearer token to a server, it
// asks the server to prove that it already holds that token. The client
// sends a fresh nonce and the token's id (TokenID, a one-way handle of the
// token); the server finds the principal whose token has that id and
// answers ServerProof, an HMAC keyed by that token over the nonce, and,
// when the client asks for version 2, over the URLs the server is reached
// at (Options.URLs: its public URL and its listener's). Only a server
// configured with the token can compute it, so a client that verifies it
// before sending the token never hands it to a process that merely
// answers on the URL it was given (a planted server.json, a wrong
// --server, a port another process took over). And a client that checks
// the signed URLs against the URL it dialled does not hand it to a relay
// either: an impostor that passes the request on to the real server gets
// a proof naming the real server's URL, not its own.
//
// What the exchange reveals to a server that does not hold the token: the
// token's id. It is HKDF-SHA256 output, so it lets an impostor test
// guesses of the token offline; a token of 32 random bytes (as `openssl
// rand -hex 32` makes) is beyond guessing, a short or dictionary token is
// not. A relay that the client reaches at the real server's own URL (a
// network position, or DNS) is not caught by the URL: TLS is what keeps
// it out.

// ProofRequest is the body of POST /v1/auth/proof.
type ProofRequest struct {
	// Nonce is fresh randomness of the client's, 32 to 64 bytes in hex.
	Nonce string `json:"nonce"`
	// TokenID is the TokenID of the token the client is about to send.
	TokenID string `json:"token_id"`
	// Version 2 asks the server to sign the URLs it is reached at into
	// the proof (ProofResponse.URLs); 0 or 1 asks for the proof of
	// clients that predate it, which binds no URL.
	Version int `json:"version,omitempty"`
}

// ProofResponse is the answer of POST /v1/auth/proof.
type ProofResponse struct {
	// Auth is false when the server has no credentials: it takes no
	// token, and the client must not send one.
	Auth bool `json:"auth"`
	// Principal is the name of the principal whose token has the id.
	Principal string `json:"principal,omitempty"`
	// URLs are the base URLs the server is reached at (Options.URLs),
	// answered to a request of version 2 and covered by its proof.
	URLs []string `json:"urls,omitempty"`
	// Proof is ServerProof(token, nonce, token id, principal, URLs).
	Proof string `json:"proof,omitempty"`
}

// ProofVersion is the version of the server proof this package asks for
// and answers: 2, which binds the server's URLs.
const ProofVersion = 2

// Derivation labels (HKDF info strings). Each value derived from a token
// has its own, so that none can stand for another.
const (
	tokenIDInfo     = "connhost token id v1"
	serverProofInfo = "connhost server proof v1"
	// serverProofV2 labels the message of a proof that binds URLs, so
	// that no version 1 proof can be taken for one.
	serverProofV2 = "connhost server proof v2"
)

// TokenID returns the public id of a bearer token: 16 bytes of
// HKDF-SHA256(token, info "connhost token id v1"), in hex. A client sends
// it, never the token, to a server it has not yet authenticated.
func TokenID(token string) string {
	return hex.EncodeToString(derive(token, tokenIDInfo, 16))
}

// ServerProof returns the proof a server holding token answers to a
// client's nonce: HMAC-SHA256 keyed by HKDF-SHA256(token, info "connhost
// server proof v1") over the label, the nonce, the token id, the
// principal's name and, for version 2 (urls not nil), each of the URLs
// the server is reached at, in hex. The label is "connhost server proof
// v1" without URLs, "connhost server proof v2" with them.
func ServerProof(token, nonce, tokenID, principal string, urls []string) string {
	m := hmac.New(sha256.New, derive(token, serverProofInfo, sha256.Size))
	parts := []string{serverProofInfo, nonce, tokenID, principal}
	if urls != nil {
		parts[0] = serverProofV2
		parts = append(parts, strconv.Itoa(len(urls)))
		parts = append(parts, urls...)
	}
	for _, part := range parts {
		// Length-prefixed: no two sequences of parts encode alike.
		fmt.Fprintf(m, "%d:%s\n", len(part), part)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// VerifyServerProof reports whether proof is ServerProof(token, nonce,
// TokenID(token), principal, urls), in constant time.
func VerifyServerProof(token, nonce, principal string, urls []string, proof string) bool {
	want := ServerProof(token, nonce, TokenID(token), principal, urls)
	return hmac.Equal([]byte(want), []byte(proof))
}

// SameServer reports whether dialled, the base URL a client sent a
// request to, is one of urls, the base URLs a server's proof says it is
// reached at: the same scheme, port (explicit or the scheme's) and path,
// and the same host ignoring case, where any two loopback hosts
// (localhost, 127.0.0.0/8, ::1) are the same.
func SameServer(dialled string, urls []string) bool {
	d, ok := baseOf(dialled)
	if !ok {
		return false
	}
	for _, u := range urls {
		if b, ok := baseOf(u); ok && b.scheme == d.scheme && b.port == d.port && b.path == d.path &&
			(b.host == d.host || loopbackHost(b.host) && loopbackHost(d.host)) {
			return true
		}
	}
	return false
}

type base struct{ scheme, host, port, path string }

func baseOf(s string) (base, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return base{}, false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return base{scheme: u.Scheme, host: strings.ToLower(u.Hostname()), port: port, path: strings.TrimRight(u.EscapedPath(), "/")}, true
}

func derive(token, info string, n int) []byte {
	k, err := hkdf.Key(sha256.New, []byte(token), nil, info, n)
	if err != nil {
		panic(err) // only for lengths beyond 255 hash sizes
	}
	return k
}

var (
	nonceRE   = regexp.MustCompile(`^[0-9a-f]{64,128}$`)
	tokenIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// proof answers POST /v1/auth/proof. It needs no token (the client has
// not decided yet whether to send one), reveals no principal to a client
// that does not know a token's id, and compares the id with every
// principal's in constant time, as authenticate compares tokens.
func (a *api) proof(w http.ResponseWriter, r *http.Request) {
	var req ProofRequest
	if !a.decode(w, r, &req, false) {
		return
	}
	switch {
	case !nonceRE.MatchString(req.Nonce):
		writeProblem(w, NewProblem(CodeBadRequest, "nonce must be 32 to 64 random bytes in lower-case hex"))
		return
	case !tokenIDRE.MatchString(req.TokenID):
		writeProblem(w, NewProblem(CodeBadRequest, "token_id must be 16 bytes in lower-case hex (httpapi.TokenID)"))
		return
	}
	if len(a.creds) == 0 {
		writeJSON(w, http.StatusOK, ProofResponse{Auth: false})
		return
	}
	// A token id stands for its token: guessing one is guessing the
	// other, and is throttled alike.
	if !a.admit(w, r) {
		return
	}
	match := -1
	for i := range a.creds {
		if subtle.ConstantTimeCompare([]byte(req.TokenID), []byte(a.creds[i].id)) == 1 {
			match = i
		}
	}
	if match < 0 {
		a.opts.Throttle.Failed(r)
		writeProblem(w, NewProblem(CodeUnauthorized, "no principal of this server has a token with this id"))
		return
	}
	p := a.creds[match].p
	res := ProofResponse{Auth: true, Principal: p.Name}
	if req.Version >= 2 {
		res.URLs = slices.Clone(a.opts.URLs)
		if res.URLs == nil {
			res.URLs = []string{}
		}
	}
	res.Proof = ServerProof(p.Token, req.Nonce, req.TokenID, p.Name, res.URLs)
	writeJSON(w, http.StatusOK, res)
}
