package ledger

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The ledger holds what calls were asked to do and what they answered
// (customers' e-mail addresses, amounts, provider receipts): only the
// user that runs connhost may read it. Pebble creates its files with mode
// 0666 and its directory with 0755 (less the umask), and its vfs lets no
// caller choose, so the ledger wraps the OS filesystem: every directory it
// creates is 0700, every file it creates (write-ahead logs, tables,
// manifests, the lock, the mark) is made 0600 at once, inside a directory
// nobody else can enter. An existing ledger with wider permissions is
// tightened when it is opened (tightenLedger).

// Permissions of the ledger's directories and files.
const (
	dirPerm  fs.FileMode = 0o700
	filePerm fs.FileMode = 0o600
)

// privateFS is the OS filesystem with the ledger's permissions.
type privateFS struct{ vfs.FS }

func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, category)
	return f, private(f, name, err)
}

func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := p.FS.OpenReadWrite(name, category, opts...)
	return f, private(f, name, err)
}

func (p privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname, category)
	return f, private(f, newname, err)
}

func (p privateFS) Lock(name string) (io.Closer, error) {
	l, err := p.FS.Lock(name)
	if err == nil {
		// By name: closing another descriptor of the file would drop the
		// lock.
		if cerr := os.Chmod(name, filePerm); cerr != nil {
			_ = l.Close()
			return nil, fmt.Errorf("ledger: restrict %s to its owner: %w", name, cerr)
		}
	}
	return l, err
}

func (p privateFS) MkdirAll(dir string, perm os.FileMode) error {
	return p.FS.MkdirAll(dir, perm&dirPerm)
}

func (p privateFS) Unwrap() vfs.FS { return p.FS }

// private makes the file just created or opened at name readable by its
// owner only; on failure it closes f.
func private(f vfs.File, name string, err error) error {
	if err != nil {
		return err
	}
	if err := os.Chmod(name, filePerm); err != nil {
		_ = f.Close()
		return fmt.Errorf("ledger: restrict %s to its owner: %w", name, err)
	}
	return nil
}

// tightenLedger takes away every permission of others from the ledger
// directory dir (0700), the files in it (0600) and the mark, as an older
// release or a restore may have left them, and logs what it changed. The
// directory that holds the mark is the deployment's (connhost's data
// directory, which may hold more): it is not changed here.
func tightenLedger(dir, mark string, logger *slog.Logger) error {
	if runtime.GOOS == "windows" {
		return nil // no permission bits to speak of
	}
	var changed []string
	tighten := func(path string, perm fs.FileMode) error {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().Perm()&^perm == 0 {
			return nil
		}
		if err := os.Chmod(path, fi.Mode().Perm()&perm); err != nil {
			return fmt.Errorf("ledger: restrict %s to its owner: %w", path, err)
		}
		changed = append(changed, fmt.Sprintf("%s %04o→%04o", filepath.Base(path), fi.Mode().Perm(), fi.Mode().Perm()&perm))
		return nil
	}
	if err := tighten(dir, dirPerm); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ledger: list %s: %w", dir, err)
	}
	for _, e := range entries {
		perm := filePerm
		if e.IsDir() {
			perm = dirPerm
		}
		if err := tighten(filepath.Join(dir, e.Name()), perm); err != nil {
			return err
		}
	}
	if err := tighten(mark, filePerm); err != nil {
		return err
	}
	if len(changed) > 0 {
		logger.Warn("ledger: took away other users' access to the ledger's files (they hold calls' arguments and results)",
			"dir", dir, "changed", len(changed), "first", changed[0])
	}
	return nil
}
