package connhost_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// TestShippedModulesAreBuiltFromPlugins proves the modules every connhost
// build embeds are what plugins/ builds to today, byte for byte (the build
// is reproducible), and what the shipped manifests pin. It fails after a
// change to a connector or its SDK until `go generate .` has been run.
func TestShippedModulesAreBuiltFromPlugins(t *testing.T) {
	ms, err := connhost.Manifests()
	require.NoError(t, err)
	require.Len(t, ms, 2)
	for _, m := range ms {
		_, built, err := wasmbuild.Cached(context.Background(), filepath.Join("plugins", m.Connector.Name))
		require.NoError(t, err)
		require.Equal(t, built, m.Connector.SHA256, "%s pins another module than plugins/%s builds to: run go generate .", m.Path, m.Connector.Name)
		b, err := connhost.Module(m.Connector.Name)
		require.NoError(t, err, "the embedded module of %s: run go generate .", m.Connector.Name)
		require.NotEmpty(t, b)
	}
}

// TestWriteModules writes the modules where a manifest names them, and
// replaces a file that is not the pinned module.
func TestWriteModules(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "modules")
	require.NoError(t, connhost.WriteModules(dir))
	ms, err := connhost.Manifests()
	require.NoError(t, err)
	for _, m := range ms {
		d, err := wasmbuild.FileDigest(m.ModulePath(dir))
		require.NoError(t, err)
		require.Equal(t, m.Connector.SHA256, d)
		fi, err := os.Stat(m.ModulePath(dir))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "a module is readable by whoever runs the host")
	}
	tampered := filepath.Join(dir, "payments.wasm")
	require.NoError(t, os.WriteFile(tampered, []byte("not a module"), 0o644))
	require.NoError(t, connhost.WriteModules(dir))
	d, err := wasmbuild.FileDigest(tampered)
	require.NoError(t, err)
	require.Equal(t, ms[1].Connector.SHA256, d)

	_, err = connhost.Module("ledger")
	require.ErrorIs(t, err, connhost.ErrNotShipped)
}
