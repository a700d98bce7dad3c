package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"

	"github.com/connhost/connhost/internal/httpapi"
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
}

// sessions is the server-side session map. A session id is 32 random
// bytes; it lives in an HttpOnly cookie and nowhere else.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	now func() time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, ttl: ttl, now: now}
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
	if ss, ok := s.m[id]; ok {
		ss.flash = append(ss.flash, n)
	}
}

// takeNotes returns the session's notes and forgets them.
func (s *sessions) takeNotes(id string) []note {
	s.mu.Lock()
	defer s.mu.Unlock()
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
}

// sameToken compares two secrets in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
