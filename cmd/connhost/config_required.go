package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/connhost/connhost/host"
)

// missingConfigError is host's *MissingConfigError told the way a CLI user
// fixes it: which connector needs which key, and the connhost.toml lines
// that give it.
type missingConfigError struct {
	msg string
	err error
}

func (e *missingConfigError) Error() string { return e.msg }
func (e *missingConfigError) Unwrap() error { return e.err }

// explainMissingConfig rewrites a *MissingConfigError from host.Open;
// other errors are returned as they are. configPath is --config ("" when
// none was given).
func explainMissingConfig(err error, configPath string) error {
	var mce *host.MissingConfigError
	if !errors.As(err, &mce) {
		return err
	}
	var b strings.Builder
	b.WriteString("refusing to start: required connector config has no value (nothing was recorded)")
	for _, k := range mce.Missing {
		fmt.Fprintf(&b, "\n  connector %s needs %q", k.Connector, k.Key)
		if k.Namespace != "" {
			fmt.Fprintf(&b, " in namespace %s", k.Namespace)
		}
		if k.Manifest != "" {
			fmt.Fprintf(&b, " (capabilities.config of %s)", k.Manifest)
		}
	}
	if configPath == "" {
		b.WriteString("\ngive it in a config file passed with --config FILE, e.g.:")
	} else {
		fmt.Fprintf(&b, "\ngive it in %s, e.g.:", configPath)
	}
	last := ""
	for _, k := range mce.Missing {
		table := "connectors." + k.Connector
		if k.Namespace != "" {
			table = "namespaces." + k.Namespace + "." + table
		}
		if table != last {
			fmt.Fprintf(&b, "\n  [%s]", table)
			last = table
		}
		fmt.Fprintf(&b, "\n  %s_env = %q   # the environment variable that holds the value", k.Key, strings.ToUpper(k.Connector+"_"+k.Key))
	}
	return &missingConfigError{msg: b.String(), err: err}
}

// explainConfigURL rewrites a *ConfigURLError from host.Open: which
// connector's URL points where, and the allow_http line that would let it
// reach there (for a test provider; production origins belong in the
// reviewed manifest). Other errors are returned as they are.
func explainConfigURL(err error, configPath string) error {
	var ce *host.ConfigURLError
	if !errors.As(err, &ce) {
		return err
	}
	var b strings.Builder
	b.WriteString("refusing to start: a configured URL is outside its connector's allowlist (nothing was recorded)")
	for _, d := range ce.Denied {
		if d.Origin == "" {
			fmt.Fprintf(&b, "\n  connector %s: %q is not an absolute http or https URL", d.Connector, d.Key)
			continue
		}
		in := ""
		if d.Namespace != "" {
			in = " in namespace " + d.Namespace
		}
		fmt.Fprintf(&b, "\n  connector %s: %s%s points at %s; the manifest allows %s", d.Connector, d.Key, in, d.Origin, strings.Join(d.Allowed, ", "))
	}
	where := "the config file (--config)"
	if configPath != "" {
		where = configPath
	}
	fmt.Fprintf(&b, "\nfix the URL, or let the connector reach a test provider by adding to %s:", where)
	for _, d := range ce.Denied {
		if d.Origin != "" {
			fmt.Fprintf(&b, "\n  [connectors.%s]\n  allow_http = [%q]", d.Connector, d.Origin)
		}
	}
	return &missingConfigError{msg: b.String(), err: err}
}
