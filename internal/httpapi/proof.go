package httpapi

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
)

// The server proof: before a client sends a bearer token to a server, it
// asks the server to prove that it already holds that token. The client
// sends a fresh nonce and the token's id (TokenID, a one-way handle of the
// token); the server finds the principal whose token has that id and
// answers ServerProof, an HMAC keyed by that token over the nonce. Only a
// server configured with the token can compute it, so a client that
// verifies it before sending the token never hands it to a process that
// merely answers on the URL it was given (a planted server.json, a wrong
// --server, a port another process took over).
//
// What the exchange reveals to a server that does not hold the token: the
// token's id. It is HKDF-SHA256 output, so it lets an impostor test
// guesses of the token offline; a token of 32 random bytes (as `openssl
// rand -hex 32` makes) is beyond guessing, a short or dictionary token is
// not. It does not bind the answer to a transport: a relay in front of the
// real server passes the proof through (use TLS for servers reached over a
// network).

// ProofRequest is the body of POST /v1/auth/proof.
type ProofRequest struct {
	// Nonce is fresh randomness of the client's, 32 to 64 bytes in hex.
	Nonce string `json:"nonce"`
	// TokenID is the TokenID of the token the client is about to send.
	TokenID string `json:"token_id"`
}

// ProofResponse is the answer of POST /v1/auth/proof.
type ProofResponse struct {
	// Auth is false when the server has no credentials: it takes no
	// token, and the client must not send one.
	Auth bool `json:"auth"`
	// Principal is the name of the principal whose token has the id.
	Principal string `json:"principal,omitempty"`
	// Proof is ServerProof(token, nonce, token id, principal).
	Proof string `json:"proof,omitempty"`
}

// Derivation labels (HKDF info strings). Each value derived from a token
// has its own, so that none can stand for another.
const (
	tokenIDInfo     = "connhost token id v1"
	serverProofInfo = "connhost server proof v1"
)

// TokenID returns the public id of a bearer token: 16 bytes of
// HKDF-SHA256(token, info "connhost token id v1"), in hex. A client sends
// it, never the token, to a server it has not yet authenticated.
func TokenID(token string) string {
	return hex.EncodeToString(derive(token, tokenIDInfo, 16))
}

// ServerProof returns the proof a server holding token answers to a
// client's nonce: HMAC-SHA256 keyed by HKDF-SHA256(token, info "connhost
// server proof v1") over the label, the nonce, the token id and the
// principal's name, in hex.
func ServerProof(token, nonce, tokenID, principal string) string {
	m := hmac.New(sha256.New, derive(token, serverProofInfo, sha256.Size))
	for _, part := range []string{serverProofInfo, nonce, tokenID, principal} {
		// Length-prefixed: no two sequences of parts encode alike.
		fmt.Fprintf(m, "%d:%s\n", len(part), part)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// VerifyServerProof reports whether proof is ServerProof(token, nonce,
// TokenID(token), principal), in constant time.
func VerifyServerProof(token, nonce, principal, proof string) bool {
	want := ServerProof(token, nonce, TokenID(token), principal)
	return hmac.Equal([]byte(want), []byte(proof))
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
	writeJSON(w, http.StatusOK, ProofResponse{Auth: true, Principal: p.Name, Proof: ServerProof(p.Token, req.Nonce, req.TokenID, p.Name)})
}
