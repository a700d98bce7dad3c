package stripe

import (
	"encoding/json"
	"net/http"
	"time"
)

// Stripe's idempotency layer, as documented at
// https://docs.stripe.com/api/idempotent_requests:
//
//   - The first request with a key saves its status code and body once the
//     endpoint has begun executing, whether it succeeded or failed
//     (including 500s raised during execution); every later request with
//     the same key gets that response back with Idempotent-Replayed: true.
//   - Requests that fail parameter validation, that are rejected before
//     execution (authentication, rate limiting, injected pre-execution
//     faults), or that conflict with a concurrent request with the same key
//     save nothing, so they can be retried.
//   - A key reused with a different endpoint or different parameters is an
//     idempotency_error (400).
//   - A key whose first request is still executing answers 409 with code
//     idempotency_key_in_use.
//   - Keys are scoped to the API key and pruned once they are at least the
//     retention old (Stripe: 24 hours); a reuse afterwards runs anew.

type idemEntry struct {
	fingerprint string
	created     time.Time
	inFlight    bool
	status      int
	body        []byte
	requestID   string
}

// execFunc runs an endpoint after its parameters were decoded. It returns
// the answer and whether the endpoint had begun executing (then the answer
// is saved under the idempotency key).
type execFunc func(r *http.Request, f *form) (status int, body any, executed bool)

const maxIdempotencyKeyLen = 255

// idempotent wraps a POST endpoint with authentication, parameter decoding
// and the idempotency layer.
func (s *Server) idempotent(exec execFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		apiKey, aerr := authenticate(r)
		if aerr != nil {
			s.write(w, r, aerr.status, errBody(aerr.err), nil)
			return
		}
		raw, aerr := s.readForm(w, r)
		if aerr == nil && len(r.Header.Get("Idempotency-Key")) > maxIdempotencyKeyLen {
			aerr = invalid("", "", "Idempotency-Key must be at most %d characters long.", maxIdempotencyKeyLen)
		}
		var f *form
		if aerr == nil {
			f, aerr = parseForm(raw)
		}
		if aerr != nil {
			s.write(w, r, aerr.status, errBody(aerr.err), nil)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			st, body, executed := exec(r, f)
			if executed && !s.saved(w, r) {
				return
			}
			s.write(w, r, st, body, nil)
			return
		}
		scope := keyScope(apiKey, key)
		fp := fingerprint(r.Method, r.URL.Path, raw)

		s.mu.Lock()
		now := s.nowLocked()
		s.sweepLocked(now)
		e := s.idem[scope]
		if e != nil && !e.inFlight && now.Sub(e.created) >= s.opts.IdempotencyRetention {
			delete(s.idem, scope)
			e = nil
		}
		switch {
		case e != nil && e.fingerprint != fp:
			s.stats.IdempotencyMismatch++
			s.mu.Unlock()
			s.write(w, r, 400, errBody(&Error{Type: typeIdempotency, Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + key + "' if you meant to execute a different request."}), nil)
			return
		case e != nil && e.inFlight:
			s.stats.IdempotencyInUse++
			s.mu.Unlock()
			s.write(w, r, 409, errBody(&Error{Type: typeIdempotency, Code: codeIdempotencyKeyInUse, Message: "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): " + key + ". Please try again later."}), nil)
			return
		case e != nil:
			s.stats.Replays++
			status, body, reqID := e.status, e.body, e.requestID
			s.mu.Unlock()
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("Original-Request", reqID)
			s.write(w, r, status, nil, body)
			return
		}
		e = &idemEntry{fingerprint: fp, created: now, inFlight: true}
		s.idem[scope] = e
		s.mu.Unlock()

		st, body, executed := exec(r, f)
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			st, b = 500, []byte(`{"error":{"type":"api_error","message":"encoding failed"}}`)
		}
		b = append(b, '\n')

		s.mu.Lock()
		if executed {
			e.inFlight = false
			e.status = st
			e.body = b
			e.requestID = newID("req_")
		} else if s.idem[scope] == e {
			delete(s.idem, scope)
		}
		s.mu.Unlock()
		if executed {
			if !s.saved(w, r) {
				return
			}
			w.Header().Set("Request-Id", e.requestID)
		}
		s.write(w, r, st, nil, b)
	}
}

// saved saves the state after an endpoint executed and reports whether
// that worked. If it did not, it answers 500: the change happened in
// memory but would not survive a restart, so the caller must not take it
// for done (a retry with the same key replays the saved answer).
func (s *Server) saved(w http.ResponseWriter, r *http.Request) bool {
	if err := s.save(); err != nil {
		s.write(w, r, 500, errBody(&Error{Type: typeAPI, Message: "sandbox: the emulator's state could not be saved: " + err.Error()}), nil)
		return false
	}
	return true
}

// sweepLocked prunes expired keys at most once a minute of emulator time.
func (s *Server) sweepLocked(now time.Time) {
	if now.Sub(s.lastSweep) < time.Minute {
		return
	}
	s.lastSweep = now
	for k, e := range s.idem {
		if !e.inFlight && now.Sub(e.created) >= s.opts.IdempotencyRetention {
			delete(s.idem, k)
		}
	}
}
