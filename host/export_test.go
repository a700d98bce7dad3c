package host

import (
	"context"
	"fmt"

	"github.com/connhost/connhost/internal/lease"
	"github.com/connhost/connhost/internal/wasmrt"
)

// CloseConnector closes a loaded connector under the executor, for tests
// of calls that never reach the guest.
func CloseConnector(ctx context.Context, e *Executor, name string) error {
	l, ok := e.conns[name]
	if !ok {
		return fmt.Errorf("no connector %q", name)
	}
	return l.conn.(*wasmrt.Connector).Close(ctx)
}

// FreezeNode stops the node's lease renewals without releasing its lease:
// to the fleet, the node looks like a process that stopped running.
func FreezeNode(e *Executor) { e.led.(*lease.Ledger).Freeze() }

// RenewNow runs one lease renewal of the node (registering again if its
// lease is gone).
func RenewNow(e *Executor) error { return e.led.(*lease.Ledger).RenewNow() }

// LoseLease makes the node lose its lease, as when it could not renew it
// within the TTL.
func LoseLease(e *Executor) { e.led.(*lease.Ledger).Lose("lost for a test") }

// RegisterAgain registers the node under a new epoch without first ending
// the current lease's work: the interleaving in which a call's write lands
// after the node, resumed from a pause, has registered again.
func RegisterAgain(e *Executor) error {
	return e.led.(*lease.Ledger).RegisterAgain(context.Background())
}

// RecoverDue runs the pass Run runs: over the executions due now only.
func RecoverDue(ctx context.Context, e *Executor) (RecoveryReport, error) { return e.recoverDue(ctx) }
