// Package trail prints an execution's audit trail for test failure
// messages. It is its own package, apart from testenv, because it needs
// the ledger, which does not build for wasip1 where testenv must.
package trail

import (
	"fmt"
	"strings"

	"github.com/connhost/connhost/ledger"
)

// Of prints an execution's events one per line, for a failure message
// that has to show how the execution got where it is.
func Of(evs []ledger.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %d %s %s→%s attempt %d %s by %s; evidence %q; reason %q\n",
			ev.Seq, ev.Time.Format("15:04:05.000"), ev.From, ev.To, ev.Attempt, ev.Decision, ev.Actor, ev.Evidence, ev.Reason)
	}
	return b.String()
}
