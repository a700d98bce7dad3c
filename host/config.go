package host

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/connhost/connhost/manifests"
)

// ConfigKey names one config key of one connector.
type ConfigKey struct {
	Connector string
	Key       string
	// Manifest is the file that declares the key ("" for a manifest parsed
	// from bytes without a name).
	Manifest string
	// Namespace is the namespace whose config (Options.NamespaceConfig,
	// over Options.Config) lacks or holds the value; "" for Options.Config
	// alone.
	Namespace string
}

// MissingConfigError reports config keys that manifests require
// (capabilities.config, less capabilities.config_optional) and that
// Options.Config has no value for, or only an empty one. Open returns it
// before it opens the ledger: a connector that would fail every call for
// want of its API key must not get as far as recording an intent or
// consuming an approval. It unwraps to ErrMissingConfig.
type MissingConfigError struct {
	Missing []ConfigKey
}

func (e *MissingConfigError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, k := range e.Missing {
		parts[i] = fmt.Sprintf("connector[%s] key %q", k.Connector, k.Key)
		if k.Namespace != "" {
			parts[i] += fmt.Sprintf(" in namespace %q", k.Namespace)
		}
		if k.Manifest != "" {
			parts[i] += " (declared in " + k.Manifest + ")"
		}
	}
	return fmt.Sprintf("required config has no value: %s; give each a value through Options.Config", strings.Join(parts, ", "))
}

// Unwrap returns ErrMissingConfig.
func (e *MissingConfigError) Unwrap() error { return ErrMissingConfig }

// missingConfig returns the required keys of ms that config, namespace
// ns's config ("" for Options.Config), has no non-empty value for.
func missingConfig(ms []*manifests.Manifest, ns string, config func(connector, key string) (string, bool)) []ConfigKey {
	var missing []ConfigKey
	for _, m := range ms {
		if m == nil {
			continue
		}
		for _, k := range m.Capabilities.RequiredConfig() {
			var v string
			ok := false
			if config != nil {
				v, ok = config(m.Connector.Name, k)
			}
			if !ok || v == "" {
				missing = append(missing, ConfigKey{Connector: m.Connector.Name, Key: k, Manifest: m.Path, Namespace: ns})
			}
		}
	}
	return missing
}

// ConfigURLError reports config values that name a URL (the key base_url,
// or any key ending in _url) whose origin the connector may not reach: it
// is in neither the manifest's capabilities.http nor the origins the
// deployment added. Open returns it before it opens the ledger: such a
// connector would fail every call, after an intent was recorded, an
// approval consumed and its attempts spent. It unwraps to
// ErrConfigURLDenied.
type ConfigURLError struct {
	Denied []DeniedURL
}

// DeniedURL is one config URL outside its connector's allowlist.
type DeniedURL struct {
	ConfigKey
	// Origin is the URL's scheme://host:port (never its path or query,
	// which may hold secrets); "" when the value is not an http(s) URL.
	Origin string
	// Allowed are the origins the connector may reach.
	Allowed []string
}

func (e *ConfigURLError) Error() string {
	parts := make([]string, len(e.Denied))
	for i, d := range e.Denied {
		what := "is not an absolute http or https URL"
		if d.Origin != "" {
			what = fmt.Sprintf("points at %s, which the connector may not reach (capabilities.http %v)", d.Origin, d.Allowed)
		}
		in := ""
		if d.Namespace != "" {
			in = fmt.Sprintf(" in namespace %q", d.Namespace)
		}
		parts[i] = fmt.Sprintf("connector[%s] key %q%s %s", d.Connector, d.Key, in, what)
	}
	return strings.Join(parts, "; ") + "; list the origin in the manifest, or add it with allow_http in the deployment's config"
}

// Unwrap returns ErrConfigURLDenied.
func (e *ConfigURLError) Unwrap() error { return ErrConfigURLDenied }

// isURLKey reports whether a config key names a URL the connector calls.
func isURLKey(key string) bool { return key == "base_url" || strings.HasSuffix(key, "_url") }

// deniedConfigURLs checks every URL-valued config key of ms in config,
// namespace ns's config ("" for Options.Config), against its manifest's
// http capability (as extended by the deployment).
func deniedConfigURLs(ms []*manifests.Manifest, ns string, config func(connector, key string) (string, bool)) []DeniedURL {
	if config == nil {
		return nil
	}
	var denied []DeniedURL
	for _, m := range ms {
		if m == nil {
			continue
		}
		for _, k := range m.Capabilities.Config {
			if !isURLKey(k) {
				continue
			}
			v, ok := config(m.Connector.Name, k)
			if !ok || v == "" {
				continue
			}
			origin, ok := originOf(v)
			if ok && slices.ContainsFunc(m.Capabilities.HTTP, func(o string) bool { o2, _ := originOf(o); return o2 == origin }) {
				continue
			}
			if !ok {
				origin = ""
			}
			denied = append(denied, DeniedURL{ConfigKey: ConfigKey{Connector: m.Connector.Name, Key: k, Manifest: m.Path, Namespace: ns},
				Origin: origin, Allowed: slices.Clone(m.Capabilities.HTTP)})
		}
	}
	return denied
}

// originOf returns the scheme://host:port of an absolute http(s) URL, the
// port made explicit, the way the http capability compares origins.
func originOf(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch {
	case scheme == "http" && port == "":
		port = "80"
	case scheme == "https" && port == "":
		port = "443"
	case scheme != "http" && scheme != "https":
		return "", false
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}
