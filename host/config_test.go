package host_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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

// TestOpenRefusesConfigURLOutsideAllowlist: a configured base_url whose
// origin the connector may not reach refuses to start, before anything is
// recorded, instead of failing every attempt of the first call.
func TestOpenRefusesConfigURLOutsideAllowlist(t *testing.T) {
	h := newHarness(t, "manual")
	require.NoError(t, h.ex.Close(context.Background()))
	h.ex = nil

	for name, tc := range map[string]struct{ value, want string }{
		"another host":   {"https://api.elsewhere.example/v1?key=secret", `points at https://api.elsewhere.example:443, which the connector may not reach`},
		"another port":   {strings.Replace(h.prov.srv.URL, "127.0.0.1:", "127.0.0.1:1", 1), "which the connector may not reach"},
		"another scheme": {strings.Replace(h.prov.srv.URL, "http://", "https://", 1), "which the connector may not reach"},
		"not a URL":      {"api.elsewhere.example", "is not an absolute http or https URL"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := h.options()
			opts.DataDir = dir
			opts.Config = func(connector, key string) (string, bool) { return tc.value, key == "base_url" }
			ex, err := host.Open(context.Background(), opts)
			if ex != nil {
				_ = ex.Close(context.Background())
			}
			require.ErrorIs(t, err, host.ErrConfigURLDenied)
			var ce *host.ConfigURLError
			require.ErrorAs(t, err, &ce)
			require.Len(t, ce.Denied, 1)
			require.Equal(t, host.ConfigKey{Connector: "effect", Key: "base_url", Manifest: h.dir + "/effect.toml"}, ce.Denied[0].ConfigKey)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "secret", "the URL's query is never printed")
			entries, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			require.Empty(t, entries, "nothing is created before the config is checked")
		})
	}

	// Added to the allowlist by the deployment, the same URL is fine.
	opts := h.options()
	opts.DataDir = filepath.Join(t.TempDir(), "data")
	opts.Config = func(connector, key string) (string, bool) {
		return "https://api.elsewhere.example/v1", key == "base_url"
	}
	opts.Manifests[0].Capabilities.HTTP = append(opts.Manifests[0].Capabilities.HTTP, "https://api.elsewhere.example:443")
	ex, err := host.Open(context.Background(), opts)
	require.NoError(t, err)
	require.NoError(t, ex.Close(context.Background()))
}

// TestNamespaceConfig: a namespace's own config values reach the calls of
// that namespace only (here: its own provider), one loaded connector
// serving both; and a namespace's URL outside the allowlist refuses Open
// as Config's would.
func TestNamespaceConfig(t *testing.T) {
	h := newHarness(t, "idempotent-retry", withDedup())
	other := newProvider(t)
	other.dedup = true
	tenantA := func(connector, key string) (string, bool) {
		if connector == "effect" && key == "base_url" {
			return other.srv.URL, true
		}
		return "", false
	}
	err := func() error {
		o := h.options()
		o.NamespaceConfig = map[string]func(string, string) (string, bool){"tenant-a": tenantA}
		_, err := host.Open(context.Background(), o)
		return err
	}()
	require.ErrorIs(t, err, host.ErrConfigURLDenied)
	require.Contains(t, err.Error(), `namespace "tenant-a"`)

	h.reopenWith(func(o *host.Options) {
		o.Manifests[0].Capabilities.HTTP = append(o.Manifests[0].Capabilities.HTTP, originOf(t, other.srv.URL))
		o.NamespaceConfig = map[string]func(string, string) (string, bool){"tenant-a": tenantA}
	})
	a := call("s1", "c1", `{"n":1}`)
	a.Namespace = "tenant-a"
	require.Equal(t, host.StatusSucceeded, h.exec(a).Status)
	require.Equal(t, host.StatusSucceeded, h.exec(call("s1", "c1", `{"n":1}`)).Status)
	b := call("s1", "c2", `{"n":2}`)
	b.Namespace = "tenant-b"
	require.Equal(t, host.StatusSucceeded, h.exec(b).Status)
	require.Equal(t, 1, other.count(), "tenant-a's call went to tenant-a's provider")
	require.Equal(t, 2, h.prov.count(), "the others went to the deployment's")
}

func originOf(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Scheme + "://" + u.Host
}
