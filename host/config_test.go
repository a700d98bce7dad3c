package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
)

// TestOpenRefusesMissingRequiredConfig: a config key a manifest declares
// (and does not mark config_optional) must have a non-empty value before
// Open touches the ledger; the error names connector, key and manifest.
func TestOpenRefusesMissingRequiredConfig(t *testing.T) {
	h := newHarness(t, "manual")
	require.NoError(t, h.ex.Close(context.Background()))
	h.ex = nil

	for name, cfg := range map[string]func(string, string) (string, bool){
		"no value":    func(string, string) (string, bool) { return "", false },
		"empty value": func(string, string) (string, bool) { return "", true },
		"nil Config":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := h.options()
			opts.DataDir, opts.Config = dir, cfg
			ex, err := host.Open(context.Background(), opts)
			if ex != nil {
				_ = ex.Close(context.Background())
			}
			require.ErrorIs(t, err, host.ErrMissingConfig)
			var mce *host.MissingConfigError
			require.ErrorAs(t, err, &mce)
			require.Equal(t, []host.ConfigKey{{Connector: "effect", Key: "base_url", Manifest: h.dir + "/effect.toml"}}, mce.Missing)
			require.ErrorContains(t, err, `connector[effect] key "base_url" (declared in `+h.dir+`/effect.toml)`)
			entries, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			require.Empty(t, entries, "nothing is created before the config is checked")
		})
	}

	// Marked optional, the key may be missing.
	opts := h.options()
	opts.DataDir = filepath.Join(t.TempDir(), "data")
	opts.Config = nil
	opts.Manifests[0].Capabilities.ConfigOptional = []string{"base_url"}
	ex, err := host.Open(context.Background(), opts)
	require.NoError(t, err)
	require.NoError(t, ex.Close(context.Background()))
}
