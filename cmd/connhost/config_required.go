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
		if k.Connector != last {
			fmt.Fprintf(&b, "\n  [connectors.%s]", k.Connector)
			last = k.Connector
		}
		fmt.Fprintf(&b, "\n  %s_env = %q   # the environment variable that holds the value", k.Key, strings.ToUpper(k.Connector+"_"+k.Key))
	}
	return &missingConfigError{msg: b.String(), err: err}
}
