package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost/server/httpapi"
)

func principalEnv(k string) (string, bool) {
	v, ok := map[string]string{
		"RUNTIME": "tok-runtime-SECRET", "RITA": "tok-rita-SECRET", "OLGA": "tok-olga-SECRET",
		"EMPTY": "", "ALSO_RITA": "tok-rita-SECRET",
	}[k]
	return v, ok
}

// TestConfigPrincipals: [server]'s token is the runtime's, each
// [[principals]] entry adds a named credential with roles, and neither
// String nor the JSON form shows a token.
func TestConfigPrincipals(t *testing.T) {
	text := `
[server]
token_env = "RUNTIME"

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "RITA"

[[principals]]
name = "olga"
roles = ["operator", "approver"]
token_env = "OLGA"
`
	c, err := ParseConfig("connhost.toml", []byte(text), principalEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Credentials()
	want := []httpapi.Principal{
		{Name: "runtime", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: "tok-runtime-SECRET"},
		{Name: "rita", Roles: []httpapi.Role{httpapi.RoleApprover}, Token: "tok-rita-SECRET"},
		{Name: "olga", Roles: []httpapi.Role{httpapi.RoleOperator, httpapi.RoleApprover}, Token: "tok-olga-SECRET"},
	}
	if !slices.EqualFunc(got, want, func(a, b httpapi.Principal) bool {
		return a.Name == b.Name && a.Token == b.Token && slices.Equal(a.Roles, b.Roles)
	}) {
		t.Fatalf("principals %+v", got)
	}
	opts := httpapi.Options{Principals: got}
	if err := opts.Validate(); err != nil {
		t.Fatalf("httpapi refuses what the config accepted: %v", err)
	}
	b, _ := json.Marshal(c)
	for _, out := range []string{c.String(), string(b)} {
		if strings.Contains(out, "SECRET") {
			t.Errorf("token printed: %s", out)
		}
		if !strings.Contains(out, "principal rita [approver]") || !strings.Contains(out, "principal olga [operator approver]") {
			t.Errorf("principals not described: %s", out)
		}
	}
}

// TestConfigPrincipalsErrors: every mistake is reported at once with
// file:line, and no token is shown.
func TestConfigPrincipalsErrors(t *testing.T) {
	text := `
[server]
token_env = "RUNTIME"

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "RITA"

[[principals]]
name = "rita"
roles = ["approver", "admin"]
token_env = "OLGA"

[[principals]]
name = "bob"
roles = ["approver"]
token_env = "ALSO_RITA"

[[principals]]
name = "eve"
roles = ["approver"]
token_env = "RUNTIME"

[[principals]]
name = "runtime"
roles = ["operator"]
token_env = "EMPTY"

[[principals]]
name = "dev-loopback"
roles = []
token = "x"
token_env = "RITA"
colour = "blue"

[[principals]]
name = "local:carl"

[[principals]]
roles = ["operator", "operator"]
token = "tok-dora-SECRET"
`
	_, err := ParseConfig("connhost.toml", []byte(text), principalEnv)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`connhost.toml:11: principal name "rita" is already used by principal 1`,
		`connhost.toml:12: unknown role admin (known: runtime, approver, operator, metrics)`,
		`connhost.toml:18: principals rita and bob have the same token: each needs its own`,
		`connhost.toml:23: principal eve has the runtime's token ([server])`,
		`connhost.toml:26: principal name "runtime" is already used by [server]'s token (the runtime)`,
		`connhost.toml:28: environment variable EMPTY (token_env of principal runtime) is empty`,
		`connhost.toml:31: principal name "dev-loopback" is reserved`,
		`connhost.toml:32: principal roles must be a non-empty list`,
		`connhost.toml:34: set token or token_env, not both`,
		`connhost.toml:35: unknown key colour in [[principals]]`,
		`connhost.toml:38: principal name "local:carl": use letters, digits`,
		`connhost.toml:37: principal local:carl has no roles`,
		`connhost.toml:37: principal local:carl has no token`,
		`connhost.toml:40: principal without a name`,
		`connhost.toml:41: role operator listed twice`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error shows a token:\n%v", err)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("errors:\n%v", err)
	}
}
