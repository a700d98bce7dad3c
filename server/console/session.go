package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
)

// session is one signed-in browser: the principal its cookie names, and
// the CSRF token its forms carry.
type session struct {
	id        string
	principal httpapi.Principal
	csrf      string
	expires   time.Time
}

// note is one line a page shows about an action: its outcome, or why it
// was refused.
type note struct {
	Error bool
	Text  string
	// Link, when set, is a console page the note points to (the call
	// decided), shown as LinkText.
	Link, LinkText string
}

// A signed-in session is its cookie and its row in the ledger. The
// cookie is
//
//	v1.<session id>.<expiry, unix seconds>.<principal name, base64url>.<MAC>
//
// The MAC is HMAC-SHA256 over everything before it, under a key derived
// from the principal's token (sessionKey). So a browser cannot change what
// it names, and rotating the principal's token ends its sessions. The
// session's CSRF token is an HMAC of its id under the same key.
//
// The ledger holds the session under a hash of its id
// (ledger.ConsoleSessionKey): its principal, when it was created, expires
// and was revoked. A request is signed in only when both agree: the
// cookie's MAC is right, and the ledger holds the session live under the
// same principal. So every process reading the ledger (a restart, every
// node of a fleet) honours a sign-out, and a row written into the ledger
// by someone without a principal's token opens nothing.
const cookieVersion = "v1"

// sessionKey derives the key that signs p's sessions from p's token.
func sessionKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("connhost console session key v1"))
	return m.Sum(nil)
}

func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// issue returns a new session of cr's principal, expiring at expires,
// and its cookie's value.
func issue(cr credential, expires time.Time) (session, string) {
	id := randomToken()
	payload := strings.Join([]string{cookieVersion, id, strconv.FormatInt(expires.Unix(), 10),
		base64.RawURLEncoding.EncodeToString([]byte(cr.p.Name))}, ".")
	value := payload + "." + base64.RawURLEncoding.EncodeToString(mac(cr.key, "session", payload))
	return session{id: id, principal: cr.p, csrf: sessionCSRF(cr.key, id), expires: expires}, value
}

func sessionCSRF(key []byte, id string) string {
	return base64.RawURLEncoding.EncodeToString(mac(key, "csrf", id))
}

// verify returns the session value names when its MAC is right under the
// key of the principal it names, and it has not expired at now. Whether
// the ledger holds it live is the caller's to ask (checkSession).
func verify(creds []credential, value string, now time.Time) (session, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 5 || parts[0] != cookieVersion || !validToken(parts[1]) {
		return session{}, false
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	name, err2 := base64.RawURLEncoding.Strict().DecodeString(parts[3])
	sum, err3 := base64.RawURLEncoding.Strict().DecodeString(parts[4])
	if err != nil || err2 != nil || err3 != nil {
		return session{}, false
	}
	payload := strings.Join(parts[:4], ".")
	for _, cr := range creds {
		if cr.p.Name != string(name) || !hmac.Equal(sum, mac(cr.key, "session", payload)) {
			continue
		}
		expires := time.Unix(exp, 0)
		if !now.Before(expires) {
			return session{}, false
		}
		return session{id: parts[1], principal: cr.p, csrf: sessionCSRF(cr.key, parts[1]), expires: expires}, true
	}
	return session{}, false
}

// errSignedOut: the request's session is none the console accepts.
var errSignedOut = errors.New("console: signed out")

// startSession signs cr's principal in: a new session, recorded in the
// ledger before its cookie's value is returned.
func (c *console) startSession(ctx context.Context, cr credential) (string, error) {
	now := c.opts.Now()
	s, value := issue(cr, now.Add(c.opts.SessionTTL))
	err := c.opts.Sessions.AddConsoleSession(ctx, ledger.ConsoleSession{Key: ledger.ConsoleSessionKey(s.id),
		Principal: cr.p.Name, Created: now, Expires: s.expires})
	if err != nil {
		return "", fmt.Errorf("console: record the session in the ledger: %w", err)
	}
	return value, nil
}

// checkSession returns nil when the ledger holds s live, under s's
// principal; errSignedOut when it does not (never recorded, revoked,
// expired, pruned, or recorded for another principal); or the error that
// kept it from reading the ledger.
func (c *console) checkSession(ctx context.Context, s session) error {
	row, err := c.opts.Sessions.ConsoleSession(ctx, ledger.ConsoleSessionKey(s.id))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return errSignedOut
	case err != nil:
		return fmt.Errorf("console: read the session from the ledger: %w", err)
	case row.Principal != s.principal.Name || !row.Live(c.opts.Now()):
		return errSignedOut
	}
	return nil
}

// The outcome of an action is shown on the next page the browser opens,
// wherever it is served (a restart, another node of a fleet): it travels
// in a short-lived cookie, under an HMAC keyed by the session's CSRF
// token, so that no other site or session can make a page say what was
// not done. The server keeps nothing.
const (
	noteCookie = "connhost_console_note"
	// maxNoteText bounds a note's text, and maxNoteCookie the cookie's
	// value (browsers keep 4 KB a cookie).
	maxNoteText, maxNoteCookie = 2000, 3800
)

// sealNotes returns the note cookie's value carrying ns for session s.
func sealNotes(s session, ns []note) string {
	for i := range ns {
		if len(ns[i].Text) > maxNoteText {
			ns[i].Text = strings.ToValidUTF8(ns[i].Text[:maxNoteText], "") + "…"
		}
	}
	for {
		b, _ := json.Marshal(ns)
		payload := base64.RawURLEncoding.EncodeToString(b)
		value := payload + "." + base64.RawURLEncoding.EncodeToString(mac([]byte(s.csrf), "note", s.id, payload))
		if len(value) <= maxNoteCookie || len(ns) == 1 {
			return value
		}
		ns = ns[1:] // the latest outcomes
	}
}

// openNotes returns the notes value carries for session s, none when
// its MAC is not s's.
func openNotes(s session, value string) []note {
	payload, sum, ok := strings.Cut(value, ".")
	got, err := base64.RawURLEncoding.Strict().DecodeString(sum)
	if !ok || err != nil || !hmac.Equal(got, mac([]byte(s.csrf), "note", s.id, payload)) {
		return nil
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	var ns []note
	if err != nil || json.Unmarshal(b, &ns) != nil {
		return nil
	}
	return ns
}

// anonymousPrefix starts the id of an anonymous session.
const anonymousPrefix = "anonymous:"

// validToken reports whether s has the form randomToken makes.
func validToken(s string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == 32
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameToken compares two secrets in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
