// Package statefile saves and loads the provider emulators' state as one
// JSON file each, so that `connhost dev` (and `connhost sandbox --state`)
// can be killed and started again against a provider that still knows
// what it did.
//
// Save writes atomically and durably: a temporary file in the same
// directory, fsync, rename over the old file, fsync of the directory. A
// crash leaves either the old state or the new one, never a mix. Load is
// strict: unknown fields, trailing data or a version it does not know are
// errors that name the file, never a silent reset.
package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// ErrCorrupt marks a state file that exists but cannot be used.
var ErrCorrupt = errors.New("statefile: corrupt state file")

// Save writes v as indented JSON to path, atomically and durably.
func Save(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Errorf("statefile: encode %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("statefile: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing left to remove
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("statefile: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("statefile: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("statefile: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("statefile: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("statefile: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("statefile: sync directory %s: %w", dir, err)
	}
	return nil
}

// Load decodes the JSON file at path into v, refusing unknown fields and
// anything after the value. found is false (and v untouched) when the
// file does not exist. A file that does not decode is an error wrapping
// ErrCorrupt.
func Load(path string, v any) (found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("statefile: %w", err)
	}
	if err := Decode(b, v); err != nil {
		return true, fmt.Errorf("%w %s: %v", ErrCorrupt, path, err)
	}
	return true, nil
}

// Decode is Load's decoding of b into v, for tests and fuzzing.
func Decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// File is an emulator's state file: Persist loads it once, before the
// emulator serves, and Save then writes a snapshot after every change,
// before the request that made it is answered, so that a provider that
// said "done" still knows it after a crash. The zero value keeps the state
// in memory only (Save does nothing).
type File[S any] struct {
	// Name is the emulator's name in errors and logs ("stripe").
	Name string
	// Empty is what moving the file away starts with ("an empty provider").
	Empty string

	path   string
	saveMu sync.Mutex
}

// Persist loads the state saved at path, when the file exists, handing it
// to restore (which checks that it holds together and takes the
// emulator's lock), and from then on saves there. A file that cannot be
// used is an error wrapping ErrCorrupt; it is never silently replaced. It
// must be called before the emulator serves.
func (f *File[S]) Persist(path string, restore func(S) error) error {
	var st S
	found, err := Load(path, &st)
	if err != nil {
		return fmt.Errorf("%s: %w (move it away to start with %s)", f.Name, err, f.Empty)
	}
	if found {
		if err := restore(st); err != nil {
			return fmt.Errorf("%s: %w %s: %v (move it away to start with %s)", f.Name, ErrCorrupt, path, err, f.Empty)
		}
	}
	f.path = path
	return nil
}

// Save writes snapshot() to the Persist path, if any. Saves are
// serialised, and each writes a snapshot taken after the caller's change.
// A failure is logged and returned.
func (f *File[S]) Save(snapshot func() S, logger *slog.Logger) error {
	if f.path == "" {
		return nil
	}
	f.saveMu.Lock()
	defer f.saveMu.Unlock()
	if err := Save(f.path, snapshot()); err != nil {
		logger.Error(f.Name+" sandbox: state not saved", "path", f.path, "err", err)
		return err
	}
	return nil
}
