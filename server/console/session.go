package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"strings"
	"sync"
	"time"

	"github.com/connhost/connhost/server/httpapi"
)

// session is one signed-in browser: the principal its token named, the
// CSRF token its forms carry, and the notes to show on its next page.
type session struct {
	id        string
	principal httpapi.Principal
	csrf      string
	expires   time.Time
	// flash are the notes the next page shows (an action's outcome),
	// then forgets.
	flash []note
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

// sessions is the server-side session map. A session id is 32 random
// bytes; it lives in an HttpOnly cookie and nowhere else. A sign-in
// (a principal's token) makes one; a browser on a server without
// credentials has none (see console.anonymousSession), only the notes
// of its last actions, in anon.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	now func() time.Time
	// anon are the notes of anonymous sessions' actions not shown yet,
	// at most maxAnonymousNotes sessions' (an action made room for drops
	// another session's notes).
	anon map[string][]note
}

// anonymousPrefix starts the id of an anonymous session, which the
// session map does not hold.
const anonymousPrefix = "anonymous:"

// maxAnonymousNotes bounds the anonymous sessions whose notes are kept.
const maxAnonymousNotes = 256

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, ttl: ttl, now: now, anon: map[string][]note{}}
}

// validToken reports whether s has the form randomToken makes.
func validToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 32
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for p, dropping the ones that have expired.
func (s *sessions) create(p httpapi.Principal) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, ss := range s.m {
		if !now.Before(ss.expires) {
			delete(s.m, id)
		}
	}
	ss := &session{id: randomToken(), principal: p, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.m[ss.id] = ss
	return ss
}

// get returns a copy of the live session id names, without its notes.
func (s *sessions) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[id]
	if !ok {
		return session{}, false
	}
	if !s.now().Before(ss.expires) {
		delete(s.m, id)
		return session{}, false
	}
	c := *ss
	c.flash = nil
	return c, true
}

// addNote keeps n for the session's next page.
func (s *sessions) addNote(id string, n note) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(id, anonymousPrefix) {
		if _, ok := s.anon[id]; !ok && len(s.anon) >= maxAnonymousNotes {
			for other := range s.anon {
				delete(s.anon, other)
				break
			}
		}
		s.anon[id] = append(s.anon[id], n)
		return
	}
	if ss, ok := s.m[id]; ok {
		ss.flash = append(ss.flash, n)
	}
}

// takeNotes returns the session's notes and forgets them.
func (s *sessions) takeNotes(id string) []note {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.anon[id]; ok {
		delete(s.anon, id)
		return n
	}
	ss, ok := s.m[id]
	if !ok {
		return nil
	}
	n := ss.flash
	ss.flash = nil
	return n
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	delete(s.anon, id)
}

// held returns how many sessions, and anonymous sessions' notes, are
// kept.
func (s *sessions) held() (sessions, anonymousNotes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m), len(s.anon)
}

// sameToken compares two secrets in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
