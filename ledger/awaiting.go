package ledger

import (
	"context"
	"fmt"
)

// loadAwaiting counts the approval index per namespace.
func (d *DB) loadAwaiting() error {
	d.awaiting, d.awaitTotal = make(map[string]int), 0
	return scan(d.db, []byte(prefixAwait), func(k, _ []byte) error {
		ns, ok := awaitNamespace(k)
		if !ok {
			return fmt.Errorf("%w: approval key %q", ErrCorrupt, k)
		}
		d.awaiting[ns]++
		d.awaitTotal++
		return nil
	})
}

// AwaitingApproval implements Ledger, from the counts kept in memory (the
// ledger owns its directory, so nothing changes the index behind them).
func (d *DB) AwaitingApproval(ctx context.Context, namespace string) (int, error) {
	if err := d.enter(ctx); err != nil {
		return 0, err
	}
	defer d.exit()
	d.awaitMu.RLock()
	defer d.awaitMu.RUnlock()
	if namespace == "" {
		return d.awaitTotal, nil
	}
	return d.awaiting[namespace], nil
}
