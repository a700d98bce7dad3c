// Package consumed is a fleet node's journal of the approvals it has
// consumed, kept outside the shared ledger: which attempts of which
// approval-gated executions were dispatched, and which of them were
// applied. The database's rows say what an execution has done, but
// whoever holds the connection string can put a row back as it was
// before its dispatch (byte for byte: the reviewer's signature still
// verifies) or edit it into a retry; the journal is what a node checks
// before it dispatches, so that an approval authorises one dispatch
// however the rows are edited (see host/journal.go, and RATIONALE.md,
// "Why a journal of consumed approvals outside the database?").
//
// A journal is a directory with one small file per fact, created with
// O_EXCL and synced (file and directory) before the call it guards goes
// out: "<h>.<attempt>" for a dispatch of that attempt, "<h>.applied" for an
// execution whose effect was applied, where <h> is a hash of the execution
// id. Creation is atomic on a local filesystem and on NFS (v3 and later),
// so several nodes may share one directory: then a dispatch one node made
// is known to all of them. Only a file's existence decides; its content
// (an Entry, JSON) says who wrote it and until when it is kept.
package consumed

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Errors of the journal. Callers compare with errors.Is.
var (
	// ErrRepeat: the dispatch claimed was made before, or the execution
	// was applied; see *RepeatError.
	ErrRepeat = errors.New("consumed: dispatch already made")
)

// Entry is what a journal file holds: the fact it records and how long it
// is kept.
type Entry struct {
	// Execution and Attempt name the dispatch (Attempt of the dispatch, or
	// the attempt that was applied).
	Execution string `json:"execution"`
	Attempt   int    `json:"attempt"`
	// Approval is the approval the dispatch consumed.
	Approval string `json:"approval,omitempty"`
	// Applied: the execution's effect was applied (the connector or
	// reconcile said so, or an operator did).
	Applied bool `json:"applied,omitempty"`
	// Node is the node that wrote the entry, At when.
	Node string    `json:"node"`
	At   time.Time `json:"at"`
	// KeepUntil is when Prune may remove the entry.
	KeepUntil time.Time `json:"keep_until"`
}

// String describes the entry for people.
func (e Entry) String() string {
	what := "dispatched attempt " + strconv.Itoa(e.Attempt)
	if e.Applied {
		what = "saw attempt " + strconv.Itoa(e.Attempt) + " applied"
	}
	if e.Approval != "" && !e.Applied {
		what += " on approval " + e.Approval
	}
	return fmt.Sprintf("node %s %s at %s", e.Node, what, e.At.UTC().Format(time.RFC3339))
}

// RepeatError is ErrRepeat with the entry that makes the dispatch a
// repeat.
type RepeatError struct {
	Entry Entry
	// Path is the entry's file.
	Path string
}

func (e *RepeatError) Error() string {
	return fmt.Sprintf("consumed: execution %s: %s (journal entry %s)", e.Entry.Execution, e.Entry, e.Path)
}

// Unwrap makes a *RepeatError match ErrRepeat.
func (e *RepeatError) Unwrap() error { return ErrRepeat }

// Journal is a journal directory. It is safe for concurrent use, by
// several processes too.
type Journal struct {
	dir string
}

// Open opens the journal in dir, creating the directory (0700) if needed,
// and checks that a file can be created in it.
func Open(dir string) (*Journal, error) {
	if dir == "" {
		return nil, errors.New("consumed: no journal directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("consumed: %w", err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("consumed: the journal directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	err = errors.Join(f.Close(), os.Remove(name))
	if err != nil {
		return nil, fmt.Errorf("consumed: %w", err)
	}
	return &Journal{dir: dir}, nil
}

// Dir is the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// stem is the file name prefix of execution id's entries: ids are any
// bytes, names are not.
func stem(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:20])
}

func (j *Journal) path(id, suffix string) string {
	return filepath.Join(j.dir, stem(id)+"."+suffix)
}

// Seen returns the entry that makes a dispatch of attempt of execution id
// a repeat: that attempt's dispatch, or the execution applied (applied
// first). ok is false when the journal holds neither.
func (j *Journal) Seen(id string, attempt int) (e Entry, path string, ok bool, err error) {
	for _, suffix := range []string{"applied", strconv.Itoa(attempt)} {
		p := j.path(id, suffix)
		b, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return Entry{}, p, false, fmt.Errorf("consumed: %w", err)
		}
		e, derr := Decode(b)
		if derr != nil {
			// The file's existence is the fact; its content only
			// describes it.
			e = Entry{Execution: id, Attempt: attempt, Applied: suffix == "applied", Node: "(an unreadable entry: " + derr.Error() + ")"}
		}
		return e, p, true, nil
	}
	return Entry{}, "", false, nil
}

// Claim records the dispatch e names (e.Execution, e.Attempt) before it is
// made. If the journal holds that dispatch already, or the execution
// applied, it returns a *RepeatError and records nothing.
func (j *Journal) Claim(e Entry) error {
	e.Applied = false
	if prev, p, ok, err := j.Seen(e.Execution, e.Attempt); err != nil {
		return err
	} else if ok {
		return &RepeatError{Entry: prev, Path: p}
	}
	p := j.path(e.Execution, strconv.Itoa(e.Attempt))
	err := j.create(p, e)
	if errors.Is(err, fs.ErrExist) {
		prev, _, _, serr := j.Seen(e.Execution, e.Attempt)
		return errors.Join(&RepeatError{Entry: prev, Path: p}, serr)
	}
	return err
}

// Applied records that execution e.Execution was applied (by attempt
// e.Attempt). Recording it again is no error.
func (j *Journal) Applied(e Entry) error {
	e.Applied = true
	err := j.create(j.path(e.Execution, "applied"), e)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

// create creates path exclusively with e's encoding, synced with its
// directory. A file whose content could not be written still exists:
// its existence is what counts.
func (j *Journal) create(path string, e Entry) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("consumed: %w", err)
	}
	b, err := json.Marshal(e)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(j.dir)
	}
	if err != nil {
		return fmt.Errorf("consumed: record %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// MaxEntryBytes bounds the entry Decode accepts.
const MaxEntryBytes = 4 << 10

// Decode parses an entry file's bytes.
func Decode(b []byte) (Entry, error) {
	if len(b) > MaxEntryBytes {
		return Entry{}, fmt.Errorf("%d bytes, more than an entry's %d", len(b), MaxEntryBytes)
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, err
	}
	if e.Execution == "" || e.Attempt < 0 {
		return Entry{}, errors.New("no execution, or a negative attempt")
	}
	return e, nil
}

// Prune removes the entries kept until before now, and those that cannot
// be read whose file is older than unreadable. It returns how many it
// removed. Entries of other processes are pruned alike: every writer
// states how long its entry is kept.
func (j *Journal) Prune(now time.Time, unreadable time.Duration) (int, error) {
	des, err := os.ReadDir(j.dir)
	if err != nil {
		return 0, fmt.Errorf("consumed: %w", err)
	}
	n := 0
	var errs []error
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(j.dir, name)
		keep := true
		if b, err := os.ReadFile(p); err == nil {
			if e, derr := Decode(b); derr == nil {
				keep = !now.After(e.KeepUntil)
			} else if info, err := de.Info(); err == nil {
				keep = !now.After(info.ModTime().Add(unreadable))
			}
		}
		if keep {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("consumed: prune: %w", errors.Join(errs...))
	}
	return n, nil
}
