package ledger

import (
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lossyFS is the filesystem of a ledger that loses unsynced writes
// (crash.WithLoseUnsynced): it keeps what Pebble
// writes to its write-ahead log in memory until the log is synced, so a
// process killed with unsynced log data loses it, as a machine that loses
// power loses its page cache. Every other file passes through. A clean
// Close of a log file writes its buffer out (an orderly exit loses
// nothing).
type lossyFS struct{ vfs.FS }

func (fs lossyFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return wrapLog(f, category, err)
}

func (fs lossyFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return wrapLog(f, category, err)
}

// walCategory is the category Pebble creates its write-ahead logs with.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

func wrapLog(f vfs.File, category vfs.DiskWriteCategory, err error) (vfs.File, error) {
	if err != nil || category != walCategory {
		return f, err
	}
	return &lossyFile{File: f}, nil
}

// lossyFile holds writes until a sync.
type lossyFile struct {
	vfs.File
	mu  sync.Mutex
	buf []byte
}

func (f *lossyFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, p...)
	return len(p), nil
}

// flush writes the held data out; the caller holds mu.
func (f *lossyFile) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	_, err := f.File.Write(f.buf)
	f.buf = f.buf[:0]
	return err
}

func (f *lossyFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *lossyFile) SyncData() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.SyncData()
}

// SyncTo syncs everything written: a prefix sync of held data is not
// worth modelling.
func (f *lossyFile) SyncTo(int64) (bool, error) { return true, f.Sync() }

func (f *lossyFile) Close() error {
	f.mu.Lock()
	err := f.flush()
	f.mu.Unlock()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
