package host

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"

	"github.com/connhost/connhost/manifests"
)

// withAllowHTTP returns ms with each connector's Options.AllowHTTP origins
// added to its capabilities.http, as copies (the caller's manifests are
// not modified), and logs one warning per connector it extends: an
// operator's override of a reviewed manifest is never silent.
func withAllowHTTP(ms []*manifests.Manifest, allow map[string][]string, logger *slog.Logger) []*manifests.Manifest {
	if len(allow) == 0 {
		return ms
	}
	out := slices.Clone(ms)
	for i, m := range out {
		if m == nil {
			continue
		}
		var add []string
		for _, o := range allow[m.Connector.Name] {
			if !slices.Contains(m.Capabilities.HTTP, o) && !slices.Contains(add, o) {
				add = append(add, o)
			}
		}
		if len(add) == 0 {
			continue
		}
		logger.Warn("allow_http: extending the http capability beyond the manifest", "connector", m.Connector.Name, "origins", add)
		cp := *m
		cp.Capabilities.HTTP = append(slices.Clone(m.Capabilities.HTTP), add...)
		out[i] = &cp
	}
	return out
}

// allowHTTPProblems reports Options.AllowHTTP entries for connectors that
// are not loaded, and origins that are not "scheme://host:port".
func allowHTTPProblems(ms []*manifests.Manifest, allow map[string][]string) []error {
	var errs []error
	names := make([]string, 0, len(allow))
	for name := range allow {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.ContainsFunc(ms, func(m *manifests.Manifest) bool { return m != nil && m.Connector.Name == name }) {
			errs = append(errs, fmt.Errorf("AllowHTTP names connector %q, which is not loaded", name))
		}
		for _, o := range allow[name] {
			if norm, ok := originOf(o); !ok || norm != o {
				errs = append(errs, fmt.Errorf("AllowHTTP[%q] %q: want an origin \"scheme://host:port\" (http or https, lower-case host, explicit port, nothing else)", name, o))
			}
		}
	}
	return errs
}
