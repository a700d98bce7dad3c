package host

import (
	"fmt"
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
		if k.Manifest != "" {
			parts[i] += " (declared in " + k.Manifest + ")"
		}
	}
	return fmt.Sprintf("required config has no value: %s; give each a value through Options.Config", strings.Join(parts, ", "))
}

// Unwrap returns ErrMissingConfig.
func (e *MissingConfigError) Unwrap() error { return ErrMissingConfig }

// missingConfig returns the required keys of ms that config has no
// non-empty value for, or nil.
func missingConfig(ms []*manifests.Manifest, config func(connector, key string) (string, bool)) error {
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
				missing = append(missing, ConfigKey{Connector: m.Connector.Name, Key: k, Manifest: m.Path})
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &MissingConfigError{Missing: missing}
}
