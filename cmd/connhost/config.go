package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/connhost/connhost/manifests"
)

// Config is a connhost.toml file:
//
//	[server]
//	listen = "127.0.0.1:8420"   # default; non-loopback needs a token
//	token_env = "CONNHOST_TOKEN" # or token = "…" (prefer the env form)
//	data = "./.connhost"         # optional, like --data
//	manifests = "./manifests"    # optional, like --manifests
//	modules = "./build"          # optional, like --modules
//
//	[connectors.payments]
//	base_url = "https://api.stripe.com"
//	api_key_env = "STRIPE_SECRET_KEY"  # the value of api_key comes from $STRIPE_SECRET_KEY
//	allow_http = ["http://127.0.0.1:12111"]  # operator override, see below
//
// A key "K_env" in a connector table names the environment variable that
// holds the value of config key K. Keys must be declared in the
// connector's manifest (capabilities.config). Unknown keys are errors with
// file:line. Secret values are never printed or logged: Config's String
// method and its JSON form redact them.
//
// allow_http is reserved: it is not a config value handed to the
// connector but an operator override of the manifest's capabilities.http.
// Unlike the other keys it is a list of origins, each "scheme://host:port"
// (http or https, explicit port, no path); every command that opens the
// executor appends them to the connector's allowlist and logs a warning
// naming the connector and the origins. It exists so that a deployment (or
// connhost crashtest) can point a connector at a provider on another origin
// — a sandbox on a loopback port, a regional endpoint — without editing the
// reviewed manifest. The default value is empty: the manifest's list only.
type Config struct {
	Path       string
	Server     ServerConfig
	Connectors map[string]map[string]configValue
	// AllowHTTP holds each connector's allow_http origins.
	AllowHTTP map[string][]string
}

// allowHTTPKey is the reserved connector key of the allowlist override.
const allowHTTPKey = "allow_http"

// ServerConfig is the [server] table.
type ServerConfig struct {
	Listen    string
	Token     string
	Data      string
	Manifests string
	Modules   string
	// tokenLine is where the token came from, for errors.
	tokenLine int
}

type configValue struct {
	value string
	env   string // the variable the value came from, if any
	line  int
}

// String describes the configuration without any value of a connector key
// or the token.
func (c *Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s: listen %s, token set: %t", c.Path, c.Server.Listen, c.Server.Token != "")
	names := make([]string, 0, len(c.Connectors))
	for n := range c.Connectors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		keys := make([]string, 0, len(c.Connectors[n]))
		for k := range c.Connectors[n] {
			keys = append(keys, k)
		}
		if len(c.AllowHTTP[n]) > 0 {
			keys = append(keys, allowHTTPKey)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, ", %s: [%s]", n, strings.Join(keys, " "))
	}
	return b.String()
}

// MarshalJSON redacts: only key names are shown.
func (c *Config) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", c.String())), nil }

// lookup is host.Options.Config.
func (c *Config) lookup(connector, key string) (string, bool) {
	v, ok := c.Connectors[connector][key]
	return v.value, ok
}

var configKeyRE = regexp.MustCompile(`^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*=`)
var configHeaderRE = regexp.MustCompile(`^\s*\[\s*([^\[\]]+?)\s*\]`)

// lineIndex finds the line of "table.key" in TOML text (tables as headers,
// keys as simple assignments, which is all connhost.toml uses).
func lineIndex(data []byte) map[string]int {
	idx := map[string]int{}
	table := ""
	for i, line := range strings.Split(string(data), "\n") {
		if m := configHeaderRE.FindStringSubmatch(line); m != nil {
			table = normTablePath(m[1])
			if _, ok := idx[table]; !ok {
				idx[table] = i + 1
			}
			continue
		}
		if m := configKeyRE.FindStringSubmatch(line); m != nil {
			k := strings.Trim(m[1], `"'`)
			p := k
			if table != "" {
				p = table + "." + k
			}
			if _, ok := idx[p]; !ok {
				idx[p] = i + 1
			}
		}
	}
	return idx
}

func normTablePath(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// loadConfig reads and validates a connhost.toml; env looks variables up
// (os.LookupEnv). It reports every problem at once, each with file:line.
func loadConfig(path string, env func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parseConfig(path, data, env)
}

func parseConfig(path string, data []byte, env func(string) (string, bool)) (*Config, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			// The parser quotes what it found, and the line may hold a
			// secret: show where, and the message without its quotes.
			return nil, fmt.Errorf("%s:%d: %s (offending text not shown: this file may hold secrets)",
				path, pe.Position.Line, redactQuoted(pe.Message))
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	lines := lineIndex(data)
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", path, lines[key], fmt.Sprintf(format, args...)))
	}
	c := &Config{Path: path, Connectors: map[string]map[string]configValue{}, AllowHTTP: map[string][]string{}}
	str := func(key string, v any) string {
		s, ok := v.(string)
		if !ok {
			bad(key, "%s must be a string", key)
		}
		return s
	}
	for top, v := range raw {
		switch top {
		case "server":
			t, ok := v.(map[string]any)
			if !ok {
				bad(top, "server must be a table")
				continue
			}
			var tokenEnv string
			for k, v := range t {
				key := "server." + k
				switch k {
				case "listen":
					c.Server.Listen = str(key, v)
				case "token":
					c.Server.Token = str(key, v)
					c.Server.tokenLine = lines[key]
				case "token_env":
					tokenEnv = str(key, v)
				case "data":
					c.Server.Data = str(key, v)
				case "manifests":
					c.Server.Manifests = str(key, v)
				case "modules":
					c.Server.Modules = str(key, v)
				default:
					bad(key, "unknown key %s in [server] (known: listen, token, token_env, data, manifests, modules)", k)
				}
			}
			if tokenEnv != "" {
				if c.Server.Token != "" {
					bad("server.token_env", "set token or token_env, not both")
				} else if val, msg := envValue(env, tokenEnv); msg != "" {
					bad("server.token_env", "environment variable %s (token_env) %s", tokenEnv, msg)
				} else {
					c.Server.Token, c.Server.tokenLine = val, lines["server.token_env"]
				}
			}
		case "connectors":
			t, ok := v.(map[string]any)
			if !ok {
				bad(top, "connectors must be a table of tables ([connectors.<name>])")
				continue
			}
			for name, v := range t {
				tbl := "connectors." + name
				kv, ok := v.(map[string]any)
				if !ok {
					bad(tbl, "%s must be a table", tbl)
					continue
				}
				vals := map[string]configValue{}
				for k, v := range kv {
					key := tbl + "." + k
					if k == allowHTTPKey {
						c.AllowHTTP[name] = originList(key, v, bad)
						continue
					}
					s := str(key, v)
					if base, ok := strings.CutSuffix(k, "_env"); ok && base != "" {
						if _, dup := kv[base]; dup {
							bad(key, "set %s or %s, not both", base, k)
							continue
						}
						val, msg := envValue(env, s)
						if msg != "" {
							bad(key, "environment variable %s (%s) %s", s, k, msg)
							continue
						}
						vals[base] = configValue{value: val, env: s, line: lines[key]}
						continue
					}
					vals[k] = configValue{value: s, line: lines[key]}
				}
				c.Connectors[name] = vals
			}
		default:
			bad(top, "unknown table or key %q (known: [server], [connectors.<name>])", top)
		}
	}
	if len(errs) > 0 {
		sortErrs(errs)
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// envValue looks up the variable a "_env" key names; msg says why it is
// unusable. An empty value is refused like a missing one: a deployment
// that forgot to export a secret must fail at startup, not send requests
// (or accept API calls) with an empty key.
func envValue(env func(string) (string, bool), name string) (val, msg string) {
	val, ok := env(name)
	switch {
	case !ok:
		return "", "is not set"
	case val == "":
		return "", "is empty"
	}
	return val, ""
}

// originList reads an allow_http value: a list of distinct
// "scheme://host:port" origins. Problems are reported through bad.
func originList(key string, v any, bad func(key, format string, args ...any)) []string {
	list, ok := v.([]any)
	if !ok {
		bad(key, "%s must be a list of origins (\"scheme://host:port\")", key)
		return nil
	}
	var out []string
	for i, e := range list {
		o, ok := e.(string)
		if !ok {
			bad(key, "%s[%d] must be a string", key, i)
			continue
		}
		if msg := checkOrigin(o); msg != "" {
			bad(key, "%s[%d] %q: %s", key, i, o, msg)
			continue
		}
		if slices.Contains(out, o) {
			bad(key, "%s[%d] %q listed twice", key, i, o)
			continue
		}
		out = append(out, o)
	}
	return out
}

// checkOrigin returns "" when o is "scheme://host:port" (http or https, a
// lower-case host name or an IP literal, an explicit port, nothing else),
// else what is wrong: the rule manifests apply to capabilities.http.
func checkOrigin(o string) string {
	if !strings.Contains(o, "://") {
		return `want "scheme://host:port"`
	}
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "scheme must be http or https"
	case u.Opaque != "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawPath != "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(o, "?#*"):
		return `want "scheme://host:port" and nothing else`
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "" {
		return "explicit port required (e.g. :443)"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
		return "port must be 1..65535"
	}
	if host == "" || host != strings.ToLower(host) {
		return "host must be a non-empty lower-case name or an IP"
	}
	return ""
}

// applyAllowHTTP appends each connector's allow_http origins to its
// manifest's http capability and logs one warning per connector changed.
func (c *Config) applyAllowHTTP(ms []*manifests.Manifest, logger *slog.Logger) {
	for _, m := range ms {
		var add []string
		for _, o := range c.AllowHTTP[m.Connector.Name] {
			if !slices.Contains(m.Capabilities.HTTP, o) {
				add = append(add, o)
			}
		}
		if len(add) == 0 {
			continue
		}
		logger.Warn("config allow_http: extending the http capability beyond the manifest",
			"config", c.Path, "connector", m.Connector.Name, "origins", add)
		m.Capabilities.HTTP = append(m.Capabilities.HTTP, add...)
	}
}

// check reports connector tables and keys the manifests do not declare.
func (c *Config) check(ms []*manifests.Manifest) error {
	byName := map[string]*manifests.Manifest{}
	for _, m := range ms {
		byName[m.Connector.Name] = m
	}
	lines := map[string]int{}
	if data, err := os.ReadFile(c.Path); err == nil {
		lines = lineIndex(data)
	}
	var errs []error
	for name, vals := range c.Connectors {
		m, ok := byName[name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: no connector %q is loaded", c.Path, lines["connectors."+name], name))
			continue
		}
		for k, v := range vals {
			if !slices.Contains(m.Capabilities.Config, k) {
				errs = append(errs, fmt.Errorf("%s:%d: connector %s does not declare config key %q (capabilities.config: %v)", c.Path, v.line, name, k, m.Capabilities.Config))
			}
		}
	}
	if len(errs) > 0 {
		sortErrs(errs)
		return errors.Join(errs...)
	}
	return nil
}

func sortErrs(errs []error) {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
}

// warnLogger is logger, or, when a one-shot command discards the
// executor's logs, a logger that prints warnings on stderr: an operator
// override must never be silent.
func (a *app) warnLogger(logger *slog.Logger) *slog.Logger {
	if logger != nil {
		return logger
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

var quotedOrLongNumber = regexp.MustCompile(`"[^"]*"|'[^']*'|[0-9_]{6,}`)

// redactQuoted replaces quoted text and long digit runs in a parser message
// with "…".
func redactQuoted(msg string) string { return quotedOrLongNumber.ReplaceAllString(msg, "…") }
