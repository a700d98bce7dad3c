package server

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/connhost/connhost/server/console"
)

// OIDCConfig is the [oidc] table: the console's sign-in with the team's
// OpenID Connect provider, beside the token form.
//
//	[oidc]
//	issuer = "https://login.example.com/"  # the provider's issuer URL, as its discovery document states it
//	client_id = "connhost-console"         # the console's client at the provider
//	client_secret_env = "CONNHOST_OIDC_SECRET"  # its secret (omit for a public client: PKCE alone)
//	name = "Example SSO"                   # the sign-in page offers "Sign in with Example SSO" (default: the issuer's host)
//
//	[[principals]]
//	name = "rita"
//	roles = ["approver"]
//	token_env = "CONNHOST_TOKEN_RITA"
//	oidc_subject = "248289761001"  # the provider's "sub" for rita
//
// The provider only proves who the person is: the [[principals]] entry
// whose oidc_subject is the ID token's subject is who signs in, with that
// entry's roles and namespaces, and an identity no entry names is
// refused. The redirect URL to register at the provider is [server]
// public_url followed by /ui/oidc/callback, so [oidc] needs public_url.
// The issuer must be https, except on a loopback host.
type OIDCConfig struct {
	Issuer, ClientID, Name string
	// ClientSecretEnv names the variable of the secret; ClientSecret is
	// its value.
	ClientSecretEnv, ClientSecret string
}

// oidcCallbackPath is where the provider sends the browser back to.
const oidcCallbackPath = console.Prefix + "oidc/callback"

// parseOIDC reads the [oidc] table t.
func parseOIDC(t map[string]any, env func(string) (string, bool), bad func(key, format string, args ...any)) OIDCConfig {
	var o OIDCConfig
	for k, v := range t {
		key := "oidc." + k
		s, ok := v.(string)
		if !ok {
			bad(key, "%s must be a string", key)
			continue
		}
		switch k {
		case "issuer":
			o.Issuer = s
			u, err := url.Parse(s)
			switch {
			case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Scheme != "https" && u.Scheme != "http"):
				bad(key, "issuer %q: want the provider's issuer URL, such as \"https://login.example.com/\"", s)
			case u.Scheme == "http" && !loopbackHost(u.Hostname()):
				bad(key, "issuer %q: an issuer off loopback must be https (its ID tokens and keys travel over it)", s)
			}
		case "client_id":
			o.ClientID = s
		case "name":
			o.Name = s
		case "client_secret_env":
			o.ClientSecretEnv = s
			val, msg := envValue(env, s)
			if msg != "" {
				bad(key, "environment variable %s (client_secret_env) %s", s, msg)
			}
			o.ClientSecret = val
		default:
			bad(key, "unknown key %s in [oidc] (known: issuer, client_id, client_secret_env, name)", k)
		}
	}
	if o.Issuer == "" {
		bad("oidc", "[oidc] needs issuer (the provider's issuer URL)")
	}
	if o.ClientID == "" {
		bad("oidc", "[oidc] needs client_id (the console's client at the provider)")
	}
	return o
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// checkOIDC reports an [oidc] table without public_url or without a
// principal to sign in, oidc_subject without [oidc], and a subject given
// to two principals.
func (c *Config) checkOIDC(bad func(key, format string, args ...any)) {
	subjects := map[string]string{}
	for i, p := range c.Principals {
		if p.OIDCSubject == "" {
			continue
		}
		key := fmt.Sprintf("principals.%d.oidc_subject", i)
		if c.OIDC.Issuer == "" {
			bad(key, "principal %s has oidc_subject, but there is no [oidc] table to sign in with", p.Name)
			continue
		}
		if other, dup := subjects[p.OIDCSubject]; dup {
			bad(key, "principals %s and %s have the same oidc_subject: one identity would sign in as either", other, p.Name)
			continue
		}
		subjects[p.OIDCSubject] = p.Name
	}
	if c.OIDC.Issuer == "" {
		return
	}
	if c.Server.PublicURL == "" {
		bad("oidc", "[oidc] needs [server] public_url: the provider sends browsers back to <public_url>%s, which must be registered with it", oidcCallbackPath)
	}
	if len(subjects) == 0 {
		bad("oidc", "[oidc] signs in nobody: give a [[principals]] entry oidc_subject = \"<the provider's sub for that person>\"")
	}
}

// ConsoleOIDC returns the console's OpenID Connect sign-in (nil without
// [oidc]).
func (c *Config) ConsoleOIDC() *console.OIDC {
	if c.OIDC.Issuer == "" {
		return nil
	}
	o := &console.OIDC{Issuer: c.OIDC.Issuer, Name: c.OIDC.Name, ClientID: c.OIDC.ClientID, ClientSecret: c.OIDC.ClientSecret,
		RedirectURL: strings.TrimRight(c.Server.PublicURL, "/") + oidcCallbackPath, Subjects: map[string]string{}}
	for _, p := range c.Principals {
		if p.OIDCSubject != "" {
			o.Subjects[p.OIDCSubject] = p.Name
		}
	}
	return o
}
