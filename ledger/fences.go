package ledger

import (
	"context"
	"fmt"
	"slices"
)

// loadFences counts the fence index per session.
func (d *DB) loadFences() error {
	d.fences = make(map[string]int)
	return scan(d.db, []byte(prefixFence), func(k, _ []byte) error {
		p, ok := fenceSessionPrefix(k)
		if !ok {
			return fmt.Errorf("%w: fence key %q", ErrCorrupt, k)
		}
		d.fences[string(p)]++
		return nil
	})
}

// countChange is what one write changes in the counts kept in memory: a
// fence entry of a session added (delta +1) or removed (-1), and an
// execution of a namespace entering (awaiting +1) or leaving (-1)
// awaiting_approval. It is applied around the write's commit (see commit).
type countChange struct {
	session string // the session's fence prefix
	delta   int

	namespace string
	awaiting  int
}

// added is the part of c that adds entries, removed the part that removes
// them.
func (c countChange) added() countChange {
	return countChange{session: c.session, delta: max(c.delta, 0), namespace: c.namespace, awaiting: max(c.awaiting, 0)}
}

func (c countChange) removed() countChange {
	return countChange{session: c.session, delta: min(c.delta, 0), namespace: c.namespace, awaiting: min(c.awaiting, 0)}
}

func (c countChange) negated() countChange {
	return countChange{session: c.session, delta: -c.delta, namespace: c.namespace, awaiting: -c.awaiting}
}

func (c countChange) zero() bool { return c.delta == 0 && c.awaiting == 0 }

func (d *DB) noteCounts(changes ...countChange) {
	if slices.ContainsFunc(changes, func(c countChange) bool { return c.delta != 0 }) {
		d.fenceMu.Lock()
		for _, c := range changes {
			if c.delta == 0 {
				continue
			}
			if n := d.fences[c.session] + c.delta; n > 0 {
				d.fences[c.session] = n
			} else {
				delete(d.fences, c.session)
			}
		}
		d.fenceMu.Unlock()
	}
	if slices.ContainsFunc(changes, func(c countChange) bool { return c.awaiting != 0 }) {
		d.awaitMu.Lock()
		for _, c := range changes {
			if c.awaiting == 0 {
				continue
			}
			d.awaitTotal += c.awaiting
			if n := d.awaiting[c.namespace] + c.awaiting; n > 0 {
				d.awaiting[c.namespace] = n
			} else {
				delete(d.awaiting, c.namespace)
			}
		}
		d.awaitMu.Unlock()
	}
}

// Fenced implements Ledger. A session without fence entries is answered
// from memory; otherwise it reads only the session's fence index.
func (d *DB) Fenced(ctx context.Context, namespace, sessionID string) ([]Record, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.exit()
	prefix := fencePrefix(namespace, sessionID)
	d.fenceMu.RLock()
	n := d.fences[string(prefix)]
	d.fenceMu.RUnlock()
	if n == 0 {
		return nil, nil
	}
	snap := d.db.NewSnapshot()
	defer snap.Close()
	var recs []Record
	err := scan(snap, prefix, func(k, _ []byte) error {
		id, ok := unescape(k[len(prefix):])
		if !ok {
			return fmt.Errorf("%w: fence key %q", ErrCorrupt, k)
		}
		rec, err := getRecord(snap, id)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
		return nil
	})
	return recs, err
}

// unescape decodes one escaped, terminated part that must fill b.
func unescape(b []byte) (string, bool) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", false
		}
		switch b[i+1] {
		case 0xff:
			out = append(out, 0)
			i++
		case 1:
			return string(out), i+2 == len(b)
		default:
			return "", false
		}
	}
	return "", false
}
