package host

import (
	"context"
	"time"

	"github.com/connhost/connhost/ledger"
)

// Observer receives the executor's measurements, e.g. to export them as
// metrics. Implementations must be safe for concurrent use and fast: they
// run on the call path.
type Observer interface {
	// ConnectorCall reports one call into a connector. ctx is the call's:
	// its span (see internal/telemetry) names the trace the call belongs
	// to, e.g. for a metric's exemplar.
	ConnectorCall(ctx context.Context, connector, operation, export string, d time.Duration, err error)
	// LedgerWrite reports the latency of one synced ledger transition;
	// ctx is the write's, as for ConnectorCall.
	LedgerWrite(ctx context.Context, d time.Duration)
	// Transition reports a state change and the decision behind it.
	Transition(to ledger.State, decision string)
	// GuestLogDropped reports, once per guest invocation that logged
	// beyond its connector's limits.log_records or limits.log_kib, the
	// records dropped and the message bytes that did not reach the log
	// (of dropped records and of cut ones).
	GuestLogDropped(connector string, records, bytes int64)
}

type nopObserver struct{}

func (nopObserver) ConnectorCall(context.Context, string, string, string, time.Duration, error) {}
func (nopObserver) LedgerWrite(context.Context, time.Duration)                                  {}
func (nopObserver) Transition(ledger.State, string)                                             {}
func (nopObserver) GuestLogDropped(string, int64, int64)                                        {}
