package main

import (
	"strings"
	"testing"

	"github.com/connhost/connhost/server"
)

// TestConfigCacheDir: where compiled modules are kept is --cache-dir,
// else [server] cache_dir, else "" (the executor's default: the user's
// cache directory); a cache_dir that is not a string is refused at its
// line.
func TestConfigCacheDir(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	c, err := server.ParseConfig("connhost.toml", []byte("[server]\ncache_dir = \"/var/cache/connhost\"\n"), env)
	if err != nil || c.Server.CacheDir != "/var/cache/connhost" {
		t.Fatalf("cache_dir: %+v %v", c, err)
	}
	for _, tc := range []struct {
		name, flag string
		cfg        *server.Config
		want       string
	}{
		{"neither", "", nil, ""},
		{"config", "", c, "/var/cache/connhost"},
		{"flag over config", "/srv/cache", c, "/srv/cache"},
		{"flag", "/srv/cache", nil, "/srv/cache"},
	} {
		a := &app{g: globals{cacheDir: tc.flag}}
		if got := a.cacheDir(tc.cfg); got != tc.want {
			t.Errorf("%s: cacheDir = %q, want %q", tc.name, got, tc.want)
		}
	}
	_, err = server.ParseConfig("connhost.toml", []byte("[server]\ncache_dir = 5\n"), env)
	if err == nil || !strings.Contains(err.Error(), "connhost.toml:2:") || !strings.Contains(err.Error(), "cache_dir must be a string") {
		t.Errorf("cache_dir = 5: %v", err)
	}
}
