package server

import (
	"strings"
	"testing"
)

// TestConfigOIDC: [oidc] and each principal's oidc_subject reach the
// console's sign-in (the redirect URL derived from public_url, the secret
// read from the environment); every mistake is an error at its line.
func TestConfigOIDC(t *testing.T) {
	env := func(k string) (string, bool) {
		switch k {
		case "OIDC_SECRET":
			return "oidc-secret-value", true
		case "TOK_RITA":
			return "tok-rita-0123456789abcdef0123456789", true
		case "TOK_OLGA":
			return "tok-olga-0123456789abcdef0123456789", true
		}
		return "", false
	}
	const principals = `
[[principals]]
name = "rita"
roles = ["approver"]
token_env = "TOK_RITA"
oidc_subject = "sub-rita"

[[principals]]
name = "olga"
roles = ["operator"]
token_env = "TOK_OLGA"
`
	c, err := ParseConfig("connhost.toml", []byte(`[server]
public_url = "https://connhost.example.com/"

[oidc]
issuer = "https://login.example.com/"
client_id = "connhost-console"
client_secret_env = "OIDC_SECRET"
name = "Example SSO"
`+principals), env)
	if err != nil {
		t.Fatal(err)
	}
	o := c.ConsoleOIDC()
	if o == nil || o.Issuer != "https://login.example.com/" || o.ClientID != "connhost-console" || o.ClientSecret != "oidc-secret-value" ||
		o.Name != "Example SSO" || o.RedirectURL != "https://connhost.example.com/ui/oidc/callback" || len(o.Subjects) != 1 || o.Subjects["sub-rita"] != "rita" {
		t.Fatalf("console OIDC %+v", o)
	}
	if strings.Contains(c.String(), "oidc-secret-value") {
		t.Errorf("the config's description shows the client secret: %s", c)
	}
	if off, err := ParseConfig("connhost.toml", []byte("[server]\n"), env); err != nil || off.ConsoleOIDC() != nil {
		t.Fatalf("no [oidc]: %v %v", off.ConsoleOIDC(), err)
	}
	oidc := "[server]\npublic_url = \"https://connhost.example.com\"\n\n[oidc]\nissuer = \"https://login.example.com/\"\nclient_id = \"c\"\n"
	for _, tt := range []struct{ name, text, want string }{
		{"no public_url", "[oidc]\nissuer = \"https://login.example.com/\"\nclient_id = \"c\"\n" + principals,
			"connhost.toml:1: [oidc] needs [server] public_url: the provider sends browsers back to <public_url>/ui/oidc/callback"},
		{"no issuer", "[server]\npublic_url = \"https://c.example.com\"\n[oidc]\nclient_id = \"c\"\n" + principals, "connhost.toml:3: [oidc] needs issuer"},
		{"no client id", "[server]\npublic_url = \"https://c.example.com\"\n[oidc]\nissuer = \"https://login.example.com/\"\n" + principals, "connhost.toml:3: [oidc] needs client_id"},
		{"plain http issuer", strings.Replace(oidc, "https://login", "http://login", 1) + principals, "connhost.toml:5: issuer \"http://login.example.com/\": an issuer off loopback must be https"},
		{"not a URL", strings.Replace(oidc, "https://login.example.com/", "login.example.com", 1) + principals, "connhost.toml:5: issuer \"login.example.com\": want the provider's issuer URL"},
		{"unset secret", oidc + "client_secret_env = \"NOT_SET\"\n" + principals, "connhost.toml:7: environment variable NOT_SET (client_secret_env) is not set"},
		{"unknown key", oidc + "client_secret = \"x\"\n" + principals, "connhost.toml:7: unknown key client_secret in [oidc] (known: issuer, client_id, client_secret_env, name)"},
		{"nobody to sign in", oidc + strings.Replace(principals, "oidc_subject = \"sub-rita\"\n", "", 1), "connhost.toml:4: [oidc] signs in nobody"},
		{"subject twice", oidc + strings.Replace(principals, "token_env = \"TOK_OLGA\"\n", "token_env = \"TOK_OLGA\"\noidc_subject = \"sub-rita\"\n", 1),
			"connhost.toml:18: principals rita and olga have the same oidc_subject"},
		{"subject without [oidc]", "[server]\n" + principals, "connhost.toml:7: principal rita has oidc_subject, but there is no [oidc] table"},
		{"empty subject", oidc + strings.Replace(principals, "\"sub-rita\"", "\"\"", 1), "connhost.toml:12: principal oidc_subject must be a non-empty string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("connhost.toml", []byte(tt.text), env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}
