package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// BackupFile is the file in a backup directory that describes the backup
// (BackupInfo, JSON); the ledger's copy is its ledger subdirectory.
const BackupFile = "backup.json"

// BackupInfo describes a backup taken by Backup.
type BackupInfo struct {
	// Dir is the backup's directory.
	Dir string `json:"dir"`
	// Identity and Generation are the ledger's when the backup was taken.
	Identity   string `json:"identity"`
	Generation uint64 `json:"generation"`
	// Position is how many committed writes the backup holds at least:
	// the high-water mark synced just before the copy was taken. A
	// restore of it is behind every witness that saw more.
	Position uint64    `json:"position"`
	TakenAt  time.Time `json:"taken_at"`
}

// ErrBackupExists is returned by Backup for a directory that exists.
var ErrBackupExists = errors.New("ledger: backup directory exists")

// Backup writes a consistent copy of the ledger into dir, which must not
// exist, while the ledger stays open and keeps taking writes: a Pebble
// checkpoint in dir/ledger, and BackupFile. The copy holds every write
// acknowledged before Backup was called (its write-ahead log is flushed
// into it) and maybe some after; BackupInfo.Position is a lower bound.
//
// A backup is restored with RestoreBackup, which treats it as any restore:
// what the ledger did after the backup is fenced, never forgotten.
func (d *DB) Backup(ctx context.Context, dir string) (BackupInfo, error) {
	if err := d.enter(ctx); err != nil {
		return BackupInfo{}, err
	}
	defer d.exit()
	if _, err := os.Lstat(dir); err == nil {
		return BackupInfo{}, fmt.Errorf("%w: %s (a backup goes into a new directory)", ErrBackupExists, dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return BackupInfo{}, fmt.Errorf("ledger: backup: %w", err)
	}
	// The high-water mark inside the copy is synced first, so that the
	// copy says at least how far it got.
	if err := d.updateMark(); err != nil {
		return BackupInfo{}, err
	}
	d.markMu.Lock()
	info := BackupInfo{Dir: dir, Identity: d.identity, Generation: d.generation, Position: d.stored, TakenAt: d.opts.Now().UTC()}
	frozen := d.frozen
	d.markMu.Unlock()
	if frozen {
		return BackupInfo{}, fmt.Errorf("ledger: backup: a restore of this ledger is being accepted; take the backup after it")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return BackupInfo{}, fmt.Errorf("ledger: backup: %w", err)
	}
	if err := d.db.Checkpoint(filepath.Join(dir, "ledger"), pebble.WithFlushedWAL()); err != nil {
		return BackupInfo{}, fmt.Errorf("ledger: backup into %s: %w", dir, err)
	}
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := writeFileSync(filepath.Join(dir, BackupFile), append(b, '\n')); err != nil {
		return BackupInfo{}, fmt.Errorf("ledger: backup: %w", err)
	}
	return info, nil
}

// ReadBackup reads the BackupInfo of the backup in dir.
func ReadBackup(dir string) (BackupInfo, error) {
	b, err := os.ReadFile(filepath.Join(dir, BackupFile))
	if err != nil {
		return BackupInfo{}, fmt.Errorf("ledger: %s is no backup: %w", dir, err)
	}
	var info BackupInfo
	if err := json.Unmarshal(b, &info); err != nil || !validIdentity(info.Identity) {
		return BackupInfo{}, fmt.Errorf("%w: %s: not a backup description", ErrCorrupt, filepath.Join(dir, BackupFile))
	}
	if fi, err := os.Stat(filepath.Join(dir, "ledger")); err != nil || !fi.IsDir() {
		return BackupInfo{}, fmt.Errorf("ledger: %s holds no ledger copy (ledger/)", dir)
	}
	info.Dir = dir
	return info, nil
}

// RestoreBackup restores the backup in dir (taken by Backup) in place of
// the ledger in opts.Dir, which must not be open: the ledger there is set
// aside (renamed with the suffix ".replaced-<time>", not deleted), the
// backup's copy is put in its place, and the restore is accepted as
// AcceptRestore does, with acc: every execution the backup holds
// unfinished and every session the witness saw written after it is fenced
// for an operator. The acceptance is made whatever the mark and the
// witness say: they lag the last writes by up to a second, and the
// backup is behind what it replaced in any case. The mark and the witness
// (opts.WitnessPath) stay where they are, so that a backup of another
// ledger is refused; without a witness, the sessions written after the
// backup cannot be named and acc.Unnamed must say that is accepted.
func RestoreBackup(ctx context.Context, opts Options, dir string, acc RestoreAcceptance) (RestoreReport, BackupInfo, error) {
	if acc.By == "" || acc.Reason == "" {
		return RestoreReport{}, BackupInfo{}, fmt.Errorf("%w: restoring a backup needs the operator's name and a reason", ErrInvalid)
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return RestoreReport{}, BackupInfo{}, err
	}
	info, err := ReadBackup(dir)
	if err != nil {
		return RestoreReport{}, BackupInfo{}, err
	}
	if _, err := os.Lstat(opts.Dir); err == nil {
		aside := opts.Dir + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(opts.Dir, aside); err != nil {
			return RestoreReport{}, info, fmt.Errorf("ledger: set aside %s: %w", opts.Dir, err)
		}
	}
	if err := copyDir(filepath.Join(dir, "ledger"), opts.Dir); err != nil {
		return RestoreReport{}, info, fmt.Errorf("ledger: restore %s: %w", dir, err)
	}
	opts.replaced = true
	rep, err := acceptRestore(ctx, opts, acc)
	return rep, info, err
}

// copyDir copies the regular files of src (a checkpoint: no
// subdirectories) into dst, created with mode 0700, each synced.
func copyDir(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file", src, e.Name())
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	d, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFileSync writes b to path (mode 0600) and syncs it.
func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
