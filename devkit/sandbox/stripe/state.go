package stripe

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// stateVersion is the format of the file Persist writes.
const stateVersion = 1

// savedState is what Persist writes: every object, every idempotency key
// whose first request finished (a request still in flight dies with the
// process, as its marker does), the counters and the clock offset. Fault
// rules and the search lag are configuration, not state.
type savedState struct {
	Version     int           `json:"version"`
	ClockOffset time.Duration `json:"clock_offset_ns"`
	Intents     []savedIntent `json:"payment_intents"`
	Refunds     []*Refund     `json:"refunds"`
	Keys        []savedKey    `json:"idempotency_keys"`
	Stats       Stats         `json:"stats"`
}

type savedIntent struct {
	PaymentIntent *PaymentIntent `json:"payment_intent"`
	At            time.Time      `json:"at"`
	Refunded      int64          `json:"refunded"`
}

type savedKey struct {
	// Scope is the API key's sha256 and the idempotency key (see
	// keyScope): the API key itself is never written down.
	Scope       string    `json:"scope"`
	Fingerprint string    `json:"fingerprint"`
	Created     time.Time `json:"created"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body"`
	RequestID   string    `json:"request_id"`
}

// keyScope is the idempotency scope of key under apiKey.
func keyScope(apiKey, key string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:]) + "/" + key
}

// Persist loads the state saved at path, when the file exists, and from
// then on saves the server's state there after every change, before the
// request that made the change is answered: a provider that said "done"
// still knows it after a crash. It must be called before the server
// serves. A file that cannot be used is an error wrapping
// statefile.ErrCorrupt (move it away to start with an empty provider); it
// is never silently replaced.
func (s *Server) Persist(path string) error {
	return s.state.Persist(path, func(st savedState) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.restoreLocked(st)
	})
}

// save writes the state to the Persist path, if any. Saves are serialised
// and each writes a snapshot taken after the caller's change.
func (s *Server) save() error {
	return s.state.Save(func() savedState {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.snapshotLocked()
	}, s.opts.Logger)
}

func (s *Server) snapshotLocked() savedState {
	st := savedState{Version: stateVersion, ClockOffset: s.offset, Stats: s.stats,
		Intents: make([]savedIntent, 0, len(s.intents)), Refunds: make([]*Refund, 0, len(s.refunds)), Keys: []savedKey{}}
	st.Stats.FaultsInjected = 0
	for _, it := range s.intents {
		st.Intents = append(st.Intents, savedIntent{PaymentIntent: it.pi.clone(), At: it.at, Refunded: it.refunded})
	}
	for _, r := range s.refunds {
		st.Refunds = append(st.Refunds, r.clone())
	}
	for scope, e := range s.idem {
		if e.inFlight {
			continue
		}
		st.Keys = append(st.Keys, savedKey{Scope: scope, Fingerprint: e.fingerprint, Created: e.created,
			Status: e.status, Body: e.body, RequestID: e.requestID})
	}
	slices.SortFunc(st.Keys, func(a, b savedKey) int { return strings.Compare(a.Scope, b.Scope) })
	return st
}

// restoreLocked replaces the state by st after checking that it holds
// together; it reports every problem at once.
func (s *Server) restoreLocked(st savedState) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if st.Version != stateVersion {
		return fmt.Errorf("version %d, this emulator reads version %d", st.Version, stateVersion)
	}
	intents := make([]*intent, 0, len(st.Intents))
	byPI := map[string]*intent{}
	byCharge := map[string]*intent{}
	for i, si := range st.Intents {
		pi := si.PaymentIntent
		switch {
		case pi == nil:
			bad("payment_intents[%d]: no payment_intent", i)
			continue
		case !strings.HasPrefix(pi.ID, "pi_"):
			bad("payment_intents[%d]: id %q is not a pi_ id", i, pi.ID)
			continue
		case byPI[pi.ID] != nil:
			bad("payment_intents[%d]: %s appears twice", i, pi.ID)
			continue
		case si.At.IsZero():
			bad("payment_intents[%d]: %s has no creation time", i, pi.ID)
		}
		it := &intent{pi: pi, at: si.At, refunded: si.Refunded}
		intents = append(intents, it)
		byPI[pi.ID] = it
		if ch := pi.LatestCharge; ch != nil {
			if byCharge[*ch] != nil {
				bad("payment_intents[%d]: charge %s belongs to two payment intents", i, *ch)
			}
			byCharge[*ch] = it
		}
	}
	refunds := make([]*Refund, 0, len(st.Refunds))
	byRefund := map[string]*Refund{}
	for i, r := range st.Refunds {
		switch {
		case r == nil || !strings.HasPrefix(r.ID, "re_"):
			bad("refunds[%d]: not a refund with a re_ id", i)
			continue
		case byRefund[r.ID] != nil:
			bad("refunds[%d]: %s appears twice", i, r.ID)
			continue
		case byPI[r.PaymentIntent] == nil:
			bad("refunds[%d]: %s refunds unknown payment intent %q", i, r.ID, r.PaymentIntent)
		}
		refunds = append(refunds, r)
		byRefund[r.ID] = r
	}
	idem := make(map[string]*idemEntry, len(st.Keys))
	for i, k := range st.Keys {
		switch {
		case k.Scope == "" || k.Fingerprint == "" || k.RequestID == "":
			bad("idempotency_keys[%d]: scope, fingerprint and request_id are required", i)
			continue
		case k.Status < 100 || k.Status > 599:
			bad("idempotency_keys[%d]: status %d is not an HTTP status", i, k.Status)
			continue
		case idem[k.Scope] != nil:
			bad("idempotency_keys[%d]: scope %q appears twice", i, k.Scope)
			continue
		}
		idem[k.Scope] = &idemEntry{fingerprint: k.Fingerprint, created: k.Created, status: k.Status, body: k.Body, requestID: k.RequestID}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s.intents, s.byPI, s.byCharge = intents, byPI, byCharge
	s.refunds, s.byRefund = refunds, byRefund
	s.idem = idem
	s.offset = st.ClockOffset
	s.stats = st.Stats
	return nil
}
