package host_test

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost"
	"github.com/connhost/connhost/host"
)

// TestAllowHTTP: a payments base_url on a sandbox's loopback origin is
// refused (ConfigURLError) until Options.AllowHTTP lists that origin;
// AllowHTTP naming a connector that is not loaded, or something that is
// not an origin, is refused; the extension is logged and the caller's
// manifest is left as it was.
func TestAllowHTTP(t *testing.T) {
	ms, err := connhost.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	const sandbox = "http://127.0.0.1:12111"
	values := func(connector, key string) (string, bool) {
		switch key {
		case "api_key":
			return "sk_test_x", true
		case "base_url":
			return sandbox, connector == "payments"
		}
		return "", false
	}
	opts := func(allow map[string][]string) host.Options {
		o := host.Options{DataDir: t.TempDir(), Manifests: ms, Config: values, AllowHTTP: allow}
		o.EnsureDefaults()
		return o
	}
	var ce *host.ConfigURLError
	o := opts(nil)
	if err := o.Validate(); !errors.As(err, &ce) || ce.Denied[0].Origin != sandbox {
		t.Fatalf("a base_url outside the manifest's allowlist: %v", err)
	}
	o = opts(map[string][]string{"payments": {sandbox}})
	if err := o.Validate(); errors.As(err, &ce) {
		t.Fatalf("with AllowHTTP the sandbox is still denied: %v", err)
	}
	for _, bad := range []map[string][]string{
		{"stripe": {sandbox}},
		{"payments": {"127.0.0.1:12111"}},
		{"payments": {"http://127.0.0.1:12111/v1"}},
		{"payments": {"http://127.0.0.1"}},
	} {
		o := opts(bad)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "AllowHTTP") {
			t.Errorf("AllowHTTP %v: %v", bad, err)
		}
	}

	before := map[string][]string{}
	for _, m := range ms {
		before[m.Connector.Name] = slices.Clone(m.Capabilities.HTTP)
	}
	var log bytes.Buffer
	o = opts(map[string][]string{"payments": {sandbox}})
	o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	o.Config = func(connector, key string) (string, bool) {
		if connector == "email" && key == "base_url" {
			return "http://127.0.0.1:8025", true
		}
		return values(connector, key)
	}
	_, err = host.Open(t.Context(), o)
	// The modules are not in DataDir: Open gets past the options and stops
	// at the first module.
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("Open: %v", err)
	}
	if !strings.Contains(log.String(), "extending the http capability") || !strings.Contains(log.String(), "connector=payments") {
		t.Errorf("the extension is not logged:\n%s", log.String())
	}
	for _, m := range ms {
		if !slices.Equal(m.Capabilities.HTTP, before[m.Connector.Name]) {
			t.Errorf("the caller's manifest %s was modified: %v", m.Connector.Name, m.Capabilities.HTTP)
		}
	}
}
