package server

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"TOKEN": "tok-secret", "KEY": "sk_live_secret"}[k]
		return v, ok
	}
	good := `
[server]
listen = "0.0.0.0:8420"
token_env = "TOKEN"

[connectors.noop]
base_url = "http://127.0.0.1:9"
api_key_env = "KEY"
`
	c, err := ParseConfig("connhost.toml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Token != "tok-secret" || c.Server.Listen != "0.0.0.0:8420" {
		t.Fatalf("server: %+v", c.Server)
	}
	if v, ok := c.Lookup("noop", "api_key"); !ok || v != "sk_live_secret" {
		t.Fatalf("api_key: %q %t", v, ok)
	}
	s := c.String()
	b, _ := json.Marshal(c)
	for _, out := range []string{s, string(b)} {
		if strings.Contains(out, "secret") {
			t.Errorf("secret printed: %s", out)
		}
	}

	bad := `
[server]
listen = "127.0.0.1:8420"
tokn = "x"

[connectors.noop]
api_key = "a"
api_key_env = "KEY"
url_env = "MISSING"

[extra]
`
	_, err = ParseConfig("connhost.toml", []byte(bad), env)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"connhost.toml:4: unknown key tokn in [server]",
		"connhost.toml:8: set api_key or api_key_env, not both",
		"connhost.toml:9: environment variable MISSING (url_env) is not set",
		`connhost.toml:11: unknown table or key "extra"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := ParseConfig("c.toml", []byte("[server\n"), env); err == nil || !strings.Contains(err.Error(), "c.toml:") {
		t.Errorf("syntax error without file:line: %v", err)
	}
}

// TestConfigRefusesEmptyEnv: a variable named by a "_env" key that is set
// but empty is refused like an unset one, naming file:line, key and
// variable; an empty secret is never used.
func TestConfigRefusesEmptyEnv(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"EMPTY_TOKEN": "", "EMPTY_KEY": ""}[k]
		return v, ok
	}
	text := `
[server]
token_env = "EMPTY_TOKEN"

[connectors.noop]
api_key_env = "EMPTY_KEY"
url_env = "UNSET"
`
	c, err := ParseConfig("connhost.toml", []byte(text), env)
	if err == nil {
		t.Fatalf("empty variables accepted: %v", c)
	}
	for _, want := range []string{
		"connhost.toml:3: environment variable EMPTY_TOKEN (token_env) is empty",
		"connhost.toml:6: environment variable EMPTY_KEY (api_key_env) is empty",
		"connhost.toml:7: environment variable UNSET (url_env) is not set",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// A config file may hold secrets: a syntax error says where, never what.
func TestConfigSyntaxErrorsDoNotEchoSecrets(t *testing.T) {
	for _, line := range []string{
		"[server]\ntoken = tSECRETVALUE\n",
		"[server]\ntoken = 99999999999999999999999\n",
		"[server]\ntoken = \"sk_live_abc\n",
	} {
		_, err := ParseConfig("connhost.toml", []byte(line), func(string) (string, bool) { return "", false })
		if err == nil {
			t.Fatalf("%q parsed", line)
		}
		for _, secret := range []string{"SECRETVALUE", "99999999", "sk_live_abc"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows the secret", err)
			}
		}
		if !strings.Contains(err.Error(), "connhost.toml:2:") {
			t.Errorf("error %q does not say where", err)
		}
	}
}
