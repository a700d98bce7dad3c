package server

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConfigServerPathsRelativeToFile: [server]'s relative paths are read
// relative to the config file's directory, not the working directory, so
// that `connhost mcp --config /srv/agent/connhost.toml` launched by a
// runtime from another directory finds ./manifests next to its config;
// absolute paths stay as written.
func TestConfigServerPathsRelativeToFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conf", "connhost.toml")
	src := `[server]
data = ".connhost"
manifests = "./manifests"
modules = "../build"
witness = "/state/node-1.witness"
tls_cert = "tls/cert.pem"
tls_key = "tls/key.pem"
`
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// From another working directory.
	t.Chdir(t.TempDir())
	cfg, err := LoadConfig(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "conf")
	for _, c := range []struct{ key, got, want string }{
		{"data", cfg.Server.Data, filepath.Join(conf, ".connhost")},
		{"manifests", cfg.Server.Manifests, filepath.Join(conf, "manifests")},
		{"modules", cfg.Server.Modules, filepath.Join(dir, "build")},
		{"witness", cfg.Server.Witness, "/state/node-1.witness"},
		{"tls_cert", cfg.Server.TLSCert, filepath.Join(conf, "tls", "cert.pem")},
		{"tls_key", cfg.Server.TLSKey, filepath.Join(conf, "tls", "key.pem")},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.key, c.got, c.want)
		}
	}
}
