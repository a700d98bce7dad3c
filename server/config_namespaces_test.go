package server

import (
	"reflect"
	"strings"
	"testing"

	"github.com/connhost/connhost/server/httpapi"
)

func tenantEnv(k string) (string, bool) {
	v, ok := map[string]string{
		"RUNTIME": "tok-runtime-SECRET", "TOK_A": "tok-a-SECRET", "TOK_B": "tok-b-SECRET", "RITA": "tok-rita-SECRET",
		"KEY_A": "sk_a_SECRET", "KEY": "sk_SECRET",
	}[k]
	return v, ok
}

// TestConfigNamespaces: principals bound to namespaces, [server]'s token
// in "default" unless it says otherwise, ["*"] for an unscoped reviewer,
// limits from [limits] with per-principal overrides and the documented
// defaults, and a namespace's own connector values.
func TestConfigNamespaces(t *testing.T) {
	text := `
[server]
token_env = "RUNTIME"

[limits]
max_pending_approvals = 50
calls_per_second = 2.5

[[principals]]
name = "tenant-a"
roles = ["runtime"]
token_env = "TOK_A"
namespaces = ["tenant-a", "tenant-a-test"]
max_pending_approvals = 10
burst = 4

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "RITA"
namespaces = ["*"]

[connectors.payments]
api_key_env = "KEY"

[namespaces.tenant-a.connectors.payments]
api_key_env = "KEY_A"
base_url = "https://eu.example"
`
	c, err := ParseConfig("connhost.toml", []byte(text), tenantEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Credentials()
	want := []httpapi.Principal{
		{Name: "runtime", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: "tok-runtime-SECRET", Namespaces: []string{"default"},
			Limits: httpapi.Limits{MaxPendingApprovals: 50, MaxArgumentBytes: DefaultMaxArgumentBytes, CallsPerSecond: 2.5}},
		{Name: "tenant-a", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: "tok-a-SECRET", Namespaces: []string{"tenant-a", "tenant-a-test"},
			Limits: httpapi.Limits{MaxPendingApprovals: 10, MaxArgumentBytes: DefaultMaxArgumentBytes, CallsPerSecond: 2.5, Burst: 4}},
		{Name: "rita", Roles: []httpapi.Role{httpapi.RoleApprover}, Token: "tok-rita-SECRET",
			Limits: httpapi.Limits{MaxPendingApprovals: 50, MaxArgumentBytes: DefaultMaxArgumentBytes, CallsPerSecond: 2.5}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("principals\n got %+v\nwant %+v", got, want)
	}
	opts := httpapi.Options{Principals: got}
	if err := opts.Validate(); err != nil {
		t.Fatalf("httpapi refuses what the config accepted: %v", err)
	}
	nc := c.NamespaceConfig()
	if v, ok := nc["tenant-a"]("payments", "api_key"); !ok || v != "sk_a_SECRET" {
		t.Errorf("tenant-a's api_key: %q %v", v, ok)
	}
	if _, ok := nc["tenant-a"]("payments", "default_from"); ok {
		t.Errorf("a key the namespace does not set is answered by it")
	}
	if v, _ := c.Lookup("payments", "api_key"); v != "sk_SECRET" {
		t.Errorf("the deployment's api_key: %q", v)
	}
	if out := c.String(); strings.Contains(out, "SECRET") || !strings.Contains(out, "principal tenant-a [runtime] in [tenant-a tenant-a-test]") ||
		!strings.Contains(out, "tenant-a/payments: [api_key base_url]") {
		t.Errorf("String: %s", out)
	}

	// Without namespaces anywhere, nothing is scoped, and the defaults
	// apply.
	c, err = ParseConfig("connhost.toml", []byte("[server]\ntoken_env = \"RUNTIME\"\n"), tenantEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Credentials()[0]
	if p.Namespaces != nil || p.Limits != (httpapi.Limits{MaxPendingApprovals: DefaultMaxPendingApprovals, MaxArgumentBytes: DefaultMaxArgumentBytes}) {
		t.Errorf("a config without namespaces: %+v", p)
	}
	if a := c.Anonymous(); a.Name != "loopback" || a.Limits.MaxPendingApprovals != DefaultMaxPendingApprovals {
		t.Errorf("anonymous: %+v", a)
	}
	// [server] may say where its token acts.
	c, err = ParseConfig("connhost.toml", []byte("[server]\ntoken_env = \"RUNTIME\"\nnamespaces = [\"*\"]\n"), tenantEnv)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Credentials()[0]; p.Namespaces != nil {
		t.Errorf("[server] namespaces = [\"*\"]: %+v", p.Namespaces)
	}
}

// TestConfigNamespacesErrors: every mistake at once, with file:line.
func TestConfigNamespacesErrors(t *testing.T) {
	text := `
[server]
token_env = "RUNTIME"
namespaces = []

[limits]
max_pending_approvals = -1
burst = 1.5
calls = 3

[[principals]]
name = "tenant-a"
roles = ["runtime"]
token_env = "TOK_A"
namespaces = ["tenant-a", "tenant-a"]
max_argument_bytes = "big"

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "RITA"

[[principals]]
name = "tenant-b"
roles = ["runtime"]
token_env = "TOK_B"
namespaces = ["*", "tenant-b"]

[namespaces.nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn.connectors.payments]
api_key = "x"

[namespaces.tenant-a.connectors.payments]
allow_http = ["http://127.0.0.1:1"]
api_key_env = "NOPE"

[namespaces.tenant-a.other]
x = "y"
`
	_, err := ParseConfig("connhost.toml", []byte(text), tenantEnv)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`connhost.toml:4: namespaces must be a non-empty list of namespaces, or ["*"] for every namespace`,
		`connhost.toml:7: max_pending_approvals must be a number, 0 or more`,
		`connhost.toml:8: burst must be a whole number, 0 or more`,
		`connhost.toml:9: unknown key calls in [limits] (known: max_pending_approvals, max_argument_bytes, calls_per_second, burst)`,
		`connhost.toml:15: namespace "tenant-a" listed twice`,
		`connhost.toml:16: max_argument_bytes must be a number, 0 or more`,
		`connhost.toml:18: principal rita has no namespaces, while tenant-a, tenant-b are bound to namespaces: give it namespaces = ["<namespace>", …], or ["*"] to let it reach every namespace`,
		`connhost.toml:27: namespaces ["*"] means every namespace: list it alone`,
		`connhost.toml:29: namespace "` + strings.Repeat("n", 257) + `" is 257 bytes long; at most 256 are allowed`,
		`connhost.toml:33: allow_http extends a connector's allowlist for every namespace: set it in [connectors.payments]`,
		`connhost.toml:34: environment variable NOPE (api_key_env) is not set`,
		`connhost.toml:36: unknown key other in [namespaces.tenant-a] (known: connectors)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "SECRET") {
		t.Errorf("a secret printed: %s", msg)
	}
}
