package host

import (
	"context"
	"fmt"

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
