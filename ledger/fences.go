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

// fenceChange is one fence entry added (+1) or removed (-1) by a write,
// applied to DB.fences around its commit (see commit).
type fenceChange struct {
	session string // the session's fence prefix
	delta   int
}

func (d *DB) noteFences(changes ...fenceChange) {
	if !slices.ContainsFunc(changes, func(c fenceChange) bool { return c.delta != 0 }) {
		return
	}
	d.fenceMu.Lock()
	defer d.fenceMu.Unlock()
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
