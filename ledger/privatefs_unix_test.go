//go:build unix

package ledger

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLedgerFilesAreTheOwnersAlone: under the usual umask 022 (which made
// every ledger file 0644, readable by every user of the machine) the
// ledger's directory is 0700 and each of its files, the mark included,
// 0600; a ledger an older release left open to others is tightened when
// it is opened, with a warning.
func TestLedgerFilesAreTheOwnersAlone(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data", "ledger")
	o := Options{Dir: dir, Logger: discardLogger(), MarkInterval: time.Hour}
	db, err := Open(ctx, o)
	require.NoError(t, err)
	_, err = db.Create(ctx, dispatchedRecord("a"), Event{Decision: "dispatch"})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	o.EnsureDefaults()
	open := others(t, dir, o.MarkPath)
	require.Empty(t, open, "files other users may read")

	// What an older release left: everything open to others.
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	}))
	require.NoError(t, os.Chmod(o.MarkPath, 0o644))
	require.NotEmpty(t, others(t, dir, o.MarkPath))
	var log bytes.Buffer
	o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	db, err = Open(ctx, o)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.Empty(t, others(t, dir, o.MarkPath), "files other users may read after a reopen")
	require.Contains(t, log.String(), "took away other users' access")
	require.True(t, strings.Count(log.String(), "took away") == 1, "one warning: %s", log.String())
}

// others lists the files of the ledger dir (and the mark) that grant any
// permission to other users.
func others(t *testing.T, dir, mark string) []string {
	t.Helper()
	var out []string
	check := func(p string) {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		if fi.Mode().Perm()&0o077 != 0 {
			out = append(out, p+" "+fi.Mode().Perm().String())
		}
	}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		check(p)
		return nil
	}))
	check(mark)
	return out
}
