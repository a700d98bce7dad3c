// Package witness is a ledger's witness file: what a deployment has
// acknowledged of its ledger — the ledger's identity, its generation (how
// many restores an operator has accepted), a commit position the ledger is
// known to have reached, and the sessions written since a horizon — kept
// where a restore of the ledger does not reach (outside the data
// directory, outside the database). Both ledger backends keep one, so that
// Open refuses a ledger that is behind what the deployment acknowledged,
// or is another ledger, instead of using it silently; and so that an
// operator accepting a restore can fence the sessions the restored ledger
// forgot. See RATIONALE.md, "Why a witness, a second mark where a
// restore does not reach?".
//
// A position means what its backend says: the Pebble ledger's count of
// committed writes (its high-water mark), or the PostgreSQL ledger's
// commit position, a counter its nodes advance after their writes. Either
// only grows within a generation, and a witness records one only once the
// ledger holds it durably, so a ledger below its witness lost acknowledged
// writes.
package witness

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Version is the witness format this release writes and reads.
const Version = 1

// MaxBytes bounds the witness file Read accepts.
const MaxBytes = 16 << 20

// MaxSessions bounds the sessions a witness file may list.
const MaxSessions = 1 << 16

// DefaultSessions is how many sessions a witness keeps by default: the
// most recently written ones.
const DefaultSessions = 4096

// Backends a witness names.
const (
	BackendPebble   = "pebble"
	BackendPostgres = "postgres"
)

// File is the content of a witness file, a JSON document:
//
//	{"witness":1,"backend":"pebble","identity":"<32 hex digits>","generation":0,
//	 "position":1234,"horizon":0,"sessions":[{"ns":"default","s":"s1","p":1230}],
//	 "updated_at":"2026-…Z"}
//
// Sessions lists, most recent first, sessions with a write after Horizon,
// each with the position of its last write (a write the ledger holds once
// it reaches that position); every session written after Horizon is
// listed. A witness that drops its oldest sessions to stay within its
// limit raises Horizon to theirs. Probe is the PostgreSQL ledger's: an
// execution and its number of events as a recent write left it, which a
// ledger whose tables were emptied or rolled back no longer holds.
type File struct {
	Version    int       `json:"witness"`
	Backend    string    `json:"backend"`
	Identity   string    `json:"identity"`
	Generation uint64    `json:"generation"`
	Position   uint64    `json:"position"`
	Probe      *Probe    `json:"probe,omitempty"`
	Horizon    uint64    `json:"horizon"`
	Sessions   []Session `json:"sessions"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Probe is an execution as a write acknowledged before the witness's
// position left it: its id and its number of events.
type Probe struct {
	ID     string
	Events uint64
}

// Session is a session the ledger wrote to, and the position of its last
// write.
type Session struct {
	Namespace, ID string
	Position      uint64
}

// Ids are Go strings that may hold any bytes; JSON strings hold only
// UTF-8. A value that is not valid UTF-8 is written base64-encoded under a
// member of its own ("s64" for "s"), so that what is read back is exact.

type sessionJSON struct {
	NS       *string `json:"ns,omitempty"`
	NS64     *string `json:"ns64,omitempty"`
	ID       *string `json:"s,omitempty"`
	ID64     *string `json:"s64,omitempty"`
	Position uint64  `json:"p"`
}

type probeJSON struct {
	ID     *string `json:"id,omitempty"`
	ID64   *string `json:"id64,omitempty"`
	Events uint64  `json:"events"`
}

func exact(s string) (plain, b64 *string) {
	if utf8.ValidString(s) {
		return &s, nil
	}
	e := base64.StdEncoding.EncodeToString([]byte(s))
	return nil, &e
}

func fromExact(name string, plain, b64 *string) (string, error) {
	switch {
	case plain != nil && b64 != nil:
		return "", fmt.Errorf("both %s and %s64", name, name)
	case plain != nil:
		return *plain, nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return "", fmt.Errorf("%s64: %w", name, err)
		}
		return string(b), nil
	}
	return "", fmt.Errorf("no %s", name)
}

// MarshalJSON implements json.Marshaler.
func (s Session) MarshalJSON() ([]byte, error) {
	j := sessionJSON{Position: s.Position}
	j.NS, j.NS64 = exact(s.Namespace)
	j.ID, j.ID64 = exact(s.ID)
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Session) UnmarshalJSON(b []byte) error {
	var j sessionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	ns, err := fromExact("ns", j.NS, j.NS64)
	if err != nil {
		return err
	}
	id, err := fromExact("s", j.ID, j.ID64)
	if err != nil {
		return err
	}
	*s = Session{Namespace: ns, ID: id, Position: j.Position}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (p Probe) MarshalJSON() ([]byte, error) {
	j := probeJSON{Events: p.Events}
	j.ID, j.ID64 = exact(p.ID)
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *Probe) UnmarshalJSON(b []byte) error {
	var j probeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	id, err := fromExact("id", j.ID, j.ID64)
	if err != nil {
		return err
	}
	*p = Probe{ID: id, Events: j.Events}
	return nil
}

// ValidIdentity reports whether s has the form of a ledger identity: 32
// lower-case hex digits.
func ValidIdentity(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Decode parses a witness file's bytes. Unknown members are ignored, so a
// later release may add some; a format version other than Version, an
// unknown backend, a malformed identity, more than MaxSessions sessions,
// trailing data or more than MaxBytes are errors.
func Decode(b []byte) (File, error) {
	if len(b) > MaxBytes {
		return File{}, fmt.Errorf("%d bytes, more than a witness's %d", len(b), MaxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var f File
	if err := dec.Decode(&f); err != nil {
		return File{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return File{}, errors.New("data after the witness document")
	}
	switch {
	case f.Version != Version:
		return File{}, fmt.Errorf("format %d, this release reads format %d", f.Version, Version)
	case f.Backend != BackendPebble && f.Backend != BackendPostgres:
		return File{}, fmt.Errorf("backend %q is neither %q nor %q", f.Backend, BackendPebble, BackendPostgres)
	case !ValidIdentity(f.Identity):
		return File{}, fmt.Errorf("identity %q is not 32 lower-case hex digits", f.Identity)
	case len(f.Sessions) > MaxSessions:
		return File{}, fmt.Errorf("%d sessions, more than %d", len(f.Sessions), MaxSessions)
	}
	return f, nil
}

// Encode returns the witness file's bytes: the document json.Marshal
// writes for f, built by hand, since a witness is written every second
// with thousands of sessions and reflection made that the largest part of
// its cost (BenchmarkEncode).
func (f File) Encode() []byte {
	b := make([]byte, 0, 256+48*len(f.Sessions))
	b = append(b, `{"witness":`...)
	b = strconv.AppendInt(b, int64(f.Version), 10)
	b = append(b, `,"backend":`...)
	b = appendJSONString(b, f.Backend)
	b = append(b, `,"identity":`...)
	b = appendJSONString(b, f.Identity)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, f.Generation, 10)
	b = append(b, `,"position":`...)
	b = strconv.AppendUint(b, f.Position, 10)
	if f.Probe != nil {
		b = append(b, `,"probe":{`...)
		b = appendExact(b, "id", f.Probe.ID)
		b = append(b, `,"events":`...)
		b = strconv.AppendUint(b, f.Probe.Events, 10)
		b = append(b, '}')
	}
	b = append(b, `,"horizon":`...)
	b = strconv.AppendUint(b, f.Horizon, 10)
	b = append(b, `,"sessions":[`...)
	for i, s := range f.Sessions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendExact(b, "ns", s.Namespace)
		b = append(b, ',')
		b = appendExact(b, "s", s.ID)
		b = append(b, `,"p":`...)
		b = strconv.AppendUint(b, s.Position, 10)
		b = append(b, '}')
	}
	b = append(b, `],"updated_at":`...)
	t, err := f.UpdatedAt.MarshalJSON()
	if err != nil {
		t = []byte(`"0001-01-01T00:00:00Z"`) // a year outside [0,9999]: not a time this writes
	}
	b = append(b, t...)
	return append(b, '}', '\n')
}

// appendExact appends the member name (or name64, base64-encoded, for a
// value that is not UTF-8) with the value v, as the Marshal methods do.
func appendExact(b []byte, name, v string) []byte {
	b = append(b, '"')
	b = append(b, name...)
	if utf8.ValidString(v) {
		b = append(b, '"', ':')
		return appendJSONString(b, v)
	}
	b = append(b, `64":"`...)
	b = base64.StdEncoding.AppendEncode(b, []byte(v))
	return append(b, '"')
}

// appendJSONString appends s, which is valid UTF-8, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Read reads the witness at path: nil if there is none. An unreadable or
// malformed witness is an error that says so, naming the file.
func Read(path string) (*File, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read witness %s: %w", path, err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read witness %s: %w", path, err)
	}
	f, err := Decode(bytes.TrimSpace(b))
	if err != nil {
		return nil, &MalformedError{Path: path, Err: err}
	}
	return &f, nil
}

// MalformedError is Read's error for a witness file that does not decode.
type MalformedError struct {
	Path string
	Err  error
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("witness %s is unreadable: %v", e.Path, e.Err)
}
func (e *MalformedError) Unwrap() error { return e.Err }

// Write replaces the witness at path atomically: a temporary file of its
// own (several processes may share a witness) is written and synced,
// renamed over the witness, and the directory synced, so that a crash
// leaves the old witness or the new one, never a torn one. The directory
// is created if it is missing. The file is readable by its owner only: it
// names sessions.
func Write(path string, f File) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write witness %s: %w", path, err)
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := path + ".tmp-" + hex.EncodeToString(r[:])
	err := writeSynced(tmp, f.Encode())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write witness %s: %w", path, err)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.Write(b)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Merge writes mine to the witness at path, merged with what other
// processes sharing the file wrote there (the nodes of a fleet on one
// machine, a one-shot command beside a server), under an advisory lock
// (path + ".lock") so that none loses another's update: a witness of the
// same ledger and generation keeps the higher position (with its probe)
// and the sessions of both, and the higher horizon (each names every
// session it wrote after its own). A witness of a later generation (a
// restore was accepted meanwhile) is left as it is and returned: the
// caller's ledger will say so. It returns what the file holds now, which
// the caller keeps as its own.
func Merge(path string, mine File, limit int) (File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return mine, fmt.Errorf("write witness %s: %w", path, err)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return mine, fmt.Errorf("lock witness %s: %w", path, err)
	}
	defer unlock()
	cur, err := Read(path)
	var me *MalformedError
	switch {
	case errors.As(err, &me):
		cur = nil // replaced by mine, which the ledger has just confirmed
	case err != nil:
		return mine, err
	}
	if cur != nil && cur.Identity == mine.Identity && cur.Backend == mine.Backend {
		switch {
		case cur.Generation > mine.Generation:
			return *cur, nil
		case cur.Generation == mine.Generation:
			if cur.Position > mine.Position {
				mine.Position, mine.Probe = cur.Position, cur.Probe
			}
			mine.Horizon = max(mine.Horizon, cur.Horizon)
			mine.Sessions = slices.Clone(mine.Sessions)
			mine.Note(cur.Sessions, limit)
		}
	}
	mine.Note(nil, limit)
	return mine, Write(path, mine)
}

// SetAside renames the witness at path (if there is one) to
// <path>.aside-<suffix> (or -2, -3, … if that exists) and returns the new
// name, "" if there was none.
func SetAside(path, suffix string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("set aside witness %s: %w", path, err)
	}
	to := path + ".aside-" + suffix
	for i := 2; ; i++ {
		if _, err := os.Stat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = fmt.Sprintf("%s.aside-%s-%d", path, suffix, i)
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("set aside witness %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("set aside witness %s: %w", path, err)
	}
	return to, nil
}

// Note records sessions written (each with the position of a write that
// the ledger holds once it reaches that position) and keeps at most limit
// sessions, the most recently written: a session dropped raises Horizon to
// its position, since the witness no longer names every session written
// after the old horizon.
func (f *File) Note(written []Session, limit int) {
	if len(written) > 0 {
		at := make(map[[2]string]int, len(f.Sessions)+len(written))
		for i, s := range f.Sessions {
			at[[2]string{s.Namespace, s.ID}] = i
		}
		for _, s := range written {
			k := [2]string{s.Namespace, s.ID}
			if i, ok := at[k]; ok {
				f.Sessions[i].Position = max(f.Sessions[i].Position, s.Position)
				continue
			}
			at[k] = len(f.Sessions)
			f.Sessions = append(f.Sessions, s)
		}
		slices.SortFunc(f.Sessions, func(a, b Session) int {
			switch {
			case a.Position != b.Position:
				if a.Position > b.Position {
					return -1
				}
				return 1
			case a.Namespace != b.Namespace:
				return strings.Compare(a.Namespace, b.Namespace)
			}
			return strings.Compare(a.ID, b.ID)
		})
	}
	if limit > 0 && len(f.Sessions) > limit {
		for _, s := range f.Sessions[limit:] {
			f.Horizon = max(f.Horizon, s.Position)
		}
		f.Sessions = slices.Clip(f.Sessions[:limit])
	}
}

// After returns the sessions the witness saw written after position p,
// and whether that list is complete: false when the witness's horizon is
// above p (it no longer names every session written after p).
func (f *File) After(p uint64) ([]Session, bool) {
	var out []Session
	for _, s := range f.Sessions {
		if s.Position > p {
			out = append(out, s)
		}
	}
	return out, f.Horizon <= p
}
