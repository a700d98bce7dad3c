package server

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost/manifests"
)

// TestConfigAllowHTTP: allow_http is an operator override appended to the
// connector's http capability, announced by a warning, and never handed
// to the connector as a config value.
func TestConfigAllowHTTP(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	path := filepath.Join(t.TempDir(), "connhost.toml")
	text := `[connectors.payments]
base_url = "http://127.0.0.1:12111"
allow_http = ["http://127.0.0.1:12111", "https://eu.api.example.com:443"]
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://127.0.0.1:12111", "https://eu.api.example.com:443"}
	if got := c.AllowHTTP["payments"]; !slices.Equal(got, want) {
		t.Fatalf("AllowHTTP = %v, want %v", got, want)
	}
	if _, ok := c.Lookup("payments", "allow_http"); ok {
		t.Error("allow_http is handed to the connector as a config value")
	}
	m, err := manifests.Load("../manifests/payments.toml")
	if err != nil {
		t.Fatal(err)
	}
	// allow_http is not a key the manifest must declare.
	if err := c.CheckConnectors([]*manifests.Manifest{m}); err != nil {
		t.Fatalf("check: %v", err)
	}
	var logs bytes.Buffer
	c.ApplyAllowHTTP([]*manifests.Manifest{m}, slog.New(slog.NewTextHandler(&logs, nil)))
	if got := m.Capabilities.HTTP; !slices.Equal(got, append([]string{"https://api.stripe.com:443"}, want...)) {
		t.Errorf("capabilities.http = %v", got)
	}
	for _, s := range append([]string{"level=WARN", "connector=payments"}, want...) {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("warning lacks %q: %s", s, logs.String())
		}
	}
	// Applying twice adds nothing twice.
	c.ApplyAllowHTTP([]*manifests.Manifest{m}, slog.New(slog.DiscardHandler))
	if n := len(m.Capabilities.HTTP); n != 3 {
		t.Errorf("re-applied: %d origins", n)
	}
	if !strings.Contains(c.String(), "allow_http") {
		t.Errorf("String() hides that an override is set: %s", c)
	}
}

// TestConfigAllowHTTPErrors: every bad origin is reported with file:line.
func TestConfigAllowHTTPErrors(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		name, value, want string
	}{
		{"not a list", `"http://127.0.0.1:1"`, "must be a list of origins"},
		{"not a string", `[1]`, "allow_http[0] must be a string"},
		{"no port", `["http://127.0.0.1"]`, "explicit port required"},
		{"path", `["http://127.0.0.1:8025/api"]`, `want "scheme://host:port" and nothing else`},
		{"scheme", `["ftp://127.0.0.1:21"]`, "scheme must be http or https"},
		{"no scheme", `["127.0.0.1:8025"]`, `want "scheme://host:port"`},
		{"port range", `["http://127.0.0.1:70000"]`, "port must be 1..65535"},
		{"upper case", `["http://Example.com:80"]`, "lower-case"},
		{"wildcard", `["https://*.example.com:443"]`, "nothing else"},
		{"twice", `["http://127.0.0.1:1", "http://127.0.0.1:1"]`, "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "[server]\nlisten = \"127.0.0.1:8420\"\n\n[connectors.email]\nbase_url = \"http://127.0.0.1:1\"\nallow_http = " + tc.value + "\n"
			_, err := ParseConfig("connhost.toml", []byte(text), noEnv)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "connhost.toml:6:") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks connhost.toml:6: and %q", err, tc.want)
			}
		})
	}
	// allow_http for a connector that is not loaded is refused like any
	// other table of an unknown connector.
	path := filepath.Join(t.TempDir(), "connhost.toml")
	if err := os.WriteFile(path, []byte("[connectors.nope]\nallow_http = [\"http://127.0.0.1:1\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifests.Load("../manifests/email.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckConnectors([]*manifests.Manifest{m}); err == nil || !strings.Contains(err.Error(), `connhost.toml:1: no connector "nope"`) {
		t.Errorf("check: %v", err)
	}
}
