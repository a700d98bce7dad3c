package ledger

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/connhost/connhost/ledger/internal/witness"
)

// mark is the content of a ledger's mark file (Options.MarkPath), a small
// JSON document kept outside the ledger's directory:
//
//	{"identity":"<32 hex digits>","protocol":2,"high_water":1234,"updated_at":"2026-…Z"}
//
// Identity is the random identity the ledger was created with (stored in
// the directory under m/identity too); HighWater is a number of committed
// writes the directory is known to hold (stored under m/hwm before the mark
// says so), in the ledger's Generation (the restores accepted, m/generation;
// omitted while 0). Open refuses a directory that is missing, of another
// identity, or behind the mark. See RATIONALE.md, "Why does a ledger
// have a mark outside its directory?".
type mark struct {
	Identity   string    `json:"identity"`
	Protocol   int       `json:"protocol"`
	Generation uint64    `json:"generation,omitempty"`
	HighWater  uint64    `json:"high_water"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// maxMarkBytes bounds the mark file Open reads; a mark is ~130 bytes.
const maxMarkBytes = 4 << 10

// identityLen is the length of an identity: 16 random bytes in hex.
const identityLen = 32

// newIdentity returns a fresh random identity.
func newIdentity() string {
	var b [identityLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// validIdentity reports whether s has the form newIdentity returns.
func validIdentity(s string) bool { return witness.ValidIdentity(s) }

// decodeMark parses a mark file's bytes. Unknown members are ignored, so a
// later release may add some; a missing or malformed identity, a protocol
// below 1, a negative or non-integer high-water mark, trailing data or more
// than maxMarkBytes are errors.
func decodeMark(b []byte) (mark, error) {
	if len(b) > maxMarkBytes {
		return mark{}, fmt.Errorf("%d bytes, more than a mark's %d", len(b), maxMarkBytes)
	}
	var m mark
	if err := json.Unmarshal(b, &m); err != nil {
		return mark{}, err
	}
	if !validIdentity(m.Identity) {
		return mark{}, fmt.Errorf("identity %q is not %d lower-case hex digits", m.Identity, identityLen)
	}
	if m.Protocol < 1 {
		return mark{}, fmt.Errorf("protocol %d is not a protocol version", m.Protocol)
	}
	return m, nil
}

// encode returns the mark file's bytes.
func (m mark) encode() []byte {
	b, _ := json.Marshal(m) // plain fields: never fails
	return append(b, '\n')
}

// readMark reads the mark at path: nil if there is none, a *DamageError if
// it is unreadable.
func readMark(fsys vfs.FS, path, dir string) (*mark, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: read mark %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMarkBytes+1))
	if err != nil {
		return nil, fmt.Errorf("ledger: read mark %s: %w", path, err)
	}
	m, err := decodeMark(bytes.TrimSpace(b))
	if err != nil {
		return nil, &DamageError{Kind: DamageMark, Dir: dir, Mark: path,
			What: fmt.Sprintf("the mark %s of the ledger in %s is unreadable (%v)", path, dir, err), Err: err}
	}
	return &m, nil
}

// writeMark replaces the mark at path atomically: a temporary file is
// written and synced, renamed over the mark, and the directory synced, so
// a crash leaves the old mark or the new one, never a torn one.
func writeMark(fsys vfs.FS, path string, m mark) error {
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("ledger: write mark %s: %w", path, err)
	}
	_, err = f.Write(m.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(fsys, fsys.PathDir(path))
	}
	if err != nil {
		return fmt.Errorf("ledger: write mark %s: %w", path, err)
	}
	return nil
}

// syncDir syncs a directory, making renames and creations in it durable.
func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
