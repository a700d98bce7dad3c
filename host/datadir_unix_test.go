//go:build unix

package host_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
)

// TestDataDirIsTheOwnersAlone: a data directory Open creates is 0700
// under the usual umask 022 (it was 0755); one that exists with access
// for others is left as the deployment chose it, with a warning.
func TestDataDirIsTheOwnersAlone(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	open := func(dir string) string {
		t.Helper()
		var log bytes.Buffer
		ex, err := host.Open(ctx, host.Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		require.NoError(t, err)
		require.NoError(t, ex.Close(ctx))
		return log.String()
	}
	fresh := filepath.Join(t.TempDir(), "data")
	require.NotContains(t, open(fresh), "open to other users")
	fi, err := os.Stat(fresh)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	shared := filepath.Join(t.TempDir(), "shared")
	require.NoError(t, os.Mkdir(shared, 0o755))
	require.Contains(t, open(shared), "the data directory is open to other users")
	fi, err = os.Stat(shared)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the deployment's directory is not changed")
	fi, err = os.Stat(filepath.Join(shared, "ledger"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the ledger in it is")
}
