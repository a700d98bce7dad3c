package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
)

// TestCompiledModulesCachedPerMachine: with no CacheDir, an executor keeps
// its compiled modules in the user's cache directory, not in its data
// directory, and an executor on a new data directory loads them from
// there instead of compiling them again (a compile would replace the
// entry's file: wazero writes a new one and renames it into place).
func TestCompiledModulesCachedPerMachine(t *testing.T) {
	h := newHarness(t, "manual") // builds the module before the user's cache moves
	require.NoError(t, h.ex.Close(context.Background()))
	h.ex = nil
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache")) // os.UserCacheDir on Linux and the BSDs
	t.Setenv("HOME", home)                                   // … and on macOS
	want, err := host.DefaultCacheDir()
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(want) && filepath.Base(want) == "wazero", want)

	entries := func() []os.FileInfo {
		t.Helper()
		var out []os.FileInfo
		require.NoError(t, filepath.Walk(want, func(path string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				out = append(out, fi)
			}
			return err
		}))
		return out
	}
	open := func() {
		t.Helper()
		o := h.options()
		o.CacheDir = ""
		o.DataDir = t.TempDir()
		ex, err := host.Open(context.Background(), o)
		require.NoError(t, err)
		require.NoError(t, ex.Close(context.Background()))
		_, err = os.Stat(filepath.Join(o.DataDir, "cache"))
		require.ErrorIs(t, err, os.ErrNotExist, "the data directory holds no compilation cache")
	}

	open()
	first := entries()
	require.Len(t, first, 1, "the effect module, compiled into the user's cache directory")
	open()
	second := entries()
	require.Len(t, second, 1)
	require.True(t, os.SameFile(first[0], second[0]), "a new data directory compiled the module again")
}
