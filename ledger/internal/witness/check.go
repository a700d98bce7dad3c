package witness

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
)

// Verdict is what Check finds comparing a ledger with its witness.
type Verdict int

const (
	// Holds: the ledger holds at least what the witness saw.
	Holds Verdict = iota
	// Other: the ledger is another ledger than the one the witness names.
	Other
	// Behind: the ledger holds less than the witness saw: an older
	// generation, a lower position, or a probe execution missing or with
	// fewer events.
	Behind
	// Accepted: the ledger's generation is above the witness's: an
	// operator accepted a restore of it since the witness was written.
	Accepted
)

// Found is what a ledger holds, as its backend read it.
type Found struct {
	Identity   string
	Generation uint64
	Position   uint64
	// ProbeEvents is the number of events the ledger holds for the
	// witness's probe execution, -1 if it holds no such execution. It is
	// ignored when the witness has no probe.
	ProbeEvents int64
}

// Check compares the ledger found with its witness w. For Other and
// Behind it also says, for people, what differs; behind says it of a
// position found below the one seen, in the backend's terms.
func Check(w File, f Found, behind func(found, seen uint64) string) (Verdict, string) {
	switch {
	case f.Identity != w.Identity:
		return Other, fmt.Sprintf("it holds ledger %s, but the witness names ledger %s", f.Identity, w.Identity)
	case f.Generation > w.Generation:
		return Accepted, ""
	case f.Generation < w.Generation:
		return Behind, fmt.Sprintf("it is at generation %d, but the witness saw generation %d (%d accepted restores): it is a copy from before a restore was accepted",
			f.Generation, w.Generation, w.Generation)
	case f.Position < w.Position:
		return Behind, behind(f.Position, w.Position)
	}
	if p := w.Probe; p != nil {
		switch {
		case f.ProbeEvents < 0:
			return Behind, fmt.Sprintf("execution %s, which the witness saw with %d events, is missing", strconv.Quote(p.ID), p.Events)
		case uint64(f.ProbeEvents) < p.Events:
			return Behind, fmt.Sprintf("execution %s holds %d events, but the witness saw %d", strconv.Quote(p.ID), f.ProbeEvents, p.Events)
		}
	}
	return Holds, ""
}

// ToFence returns, from the sessions witnesses ws saw, those written after
// a restore to position restored of generation gen, and whether ws name
// every session written after it. A witness of generation gen names
// those written after restored, as far back as its horizon; a witness of
// a later generation (the restored ledger predates an accepted restore)
// names only sessions of later generations, all written after the
// backup, not those in between; a witness of an earlier generation names
// what it saw after the position the acceptance that followed it
// restored (accepted returns it). Without a witness nothing is named.
func ToFence(ws []*File, gen, restored uint64, accepted func(gen uint64) (uint64, error)) ([]Session, bool, error) {
	complete := len(ws) > 0
	at := map[[2]string]int{}
	var out []Session
	for _, w := range ws {
		var after []Session
		ok := false
		switch {
		case w.Generation == gen:
			after, ok = w.After(restored)
		case w.Generation > gen:
			after = w.Sessions
		default:
			p, err := accepted(w.Generation + 1)
			if err != nil {
				return nil, false, err
			}
			after, ok = w.After(p)
		}
		complete = complete && ok
		for _, s := range after {
			k := [2]string{s.Namespace, s.ID}
			if i, dup := at[k]; dup {
				out[i].Position = max(out[i].Position, s.Position)
				continue
			}
			at[k] = len(out)
			out = append(out, s)
		}
	}
	return out, complete, nil
}

// Tracker collects the sessions a ledger writes to between two witness
// updates, with the position of each one's last write. It is safe for
// concurrent use; Touch takes one of 64 mutexes, chosen by the session,
// so concurrent writers rarely wait for each other.
type Tracker struct {
	seed   maphash.Seed
	shards [64]trackerShard
}

type trackerShard struct {
	mu sync.Mutex
	m  map[[2]string]uint64
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker { return &Tracker{seed: maphash.MakeSeed()} }

// Touch records a write to the session at position pos.
func (t *Tracker) Touch(namespace, session string, pos uint64) {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(namespace)
	h.WriteByte(0)
	h.WriteString(session)
	s := &t.shards[h.Sum64()%uint64(len(t.shards))]
	s.mu.Lock()
	if s.m == nil {
		s.m = map[[2]string]uint64{}
	}
	k := [2]string{namespace, session}
	s.m[k] = max(s.m[k], pos)
	s.mu.Unlock()
}

// Drain returns the sessions touched since the last Drain and forgets
// them.
func (t *Tracker) Drain() []Session {
	var out []Session
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		m := s.m
		s.m = nil
		s.mu.Unlock()
		for k, p := range m {
			out = append(out, Session{Namespace: k[0], ID: k[1], Position: p})
		}
	}
	return out
}
