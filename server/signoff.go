package server

import (
	"errors"
	"fmt"
	"strings"

	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// signoffError is a refusal to start because connectors are not covered
// by their sign-off (require_signoff = true). It lists every connector at
// once, each with what changed.
type signoffError struct{ errs []error }

func (e *signoffError) Error() string {
	var b strings.Builder
	b.WriteString("refusing to start: require_signoff is set and ")
	if len(e.errs) == 1 {
		b.WriteString("a connector is not covered by its sign-off (nothing was recorded):")
	} else {
		fmt.Fprintf(&b, "%d connectors are not covered by their sign-off (nothing was recorded):", len(e.errs))
	}
	for _, err := range e.errs {
		b.WriteString("\n  ")
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *signoffError) Unwrap() []error { return e.errs }

// checkSignoffs verifies that every manifest's sign-off (next to it, see
// audit.SignoffPath) covers the manifest as it is and the module in
// moduleDir as it is. A module that cannot be read is left to the host,
// which refuses it with its own error.
func checkSignoffs(ms []*manifests.Manifest, moduleDir string) error {
	var errs []error
	for _, m := range ms {
		digest, _ := wasmbuild.FileDigest(m.ModulePath(moduleDir))
		if err := audit.CheckSignoff(m, digest); err != nil {
			var se *audit.SignoffError
			if !errors.As(err, &se) {
				err = fmt.Errorf("connector %s: %w", m.Connector.Name, err)
			}
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &signoffError{errs: errs}
}
