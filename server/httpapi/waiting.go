package httpapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/waiting"
)

// Metric names of what waits for a human, read from the ledger at scrape
// time (see waitingCollector).
const (
	MetricWaiting       = "connhost_executions_waiting"
	MetricWaitingOldest = "connhost_executions_waiting_oldest_seconds"
	MetricFenced        = "connhost_sessions_fenced"
)

// waitingScrapeTimeout bounds the ledger read of one scrape.
const waitingScrapeTimeout = 5 * time.Second

// waitingCollector reports at scrape time what waits for a human now, read
// from the ledger's pending index (waiting.Read), so that the values
// survive a restart and include what other processes or nodes on the same
// ledger made wait:
//
//   - connhost_executions_waiting{state}: executions in awaiting_approval
//     and in recovery_required (both always present, 0 when none);
//   - connhost_executions_waiting_oldest_seconds{state}: how long the
//     oldest of them has been in its state (0 when none);
//   - connhost_sessions_fenced: sessions whose new calls are refused
//     until an operator resolves their recovery_required calls.
//
// A ledger that cannot be read leaves the three out of that scrape (and
// logs why): an outage must not read as "nothing waits", and the other
// metrics (a lost lease) matter most then.
type waitingCollector struct {
	ex     *host.Executor
	log    *slog.Logger
	now    func() time.Time
	count  *prometheus.Desc
	oldest *prometheus.Desc
	fenced *prometheus.Desc
}

func newWaitingCollector(ex *host.Executor, now func() time.Time, log *slog.Logger) *waitingCollector {
	return &waitingCollector{
		ex:     ex,
		log:    log,
		now:    now,
		count:  prometheus.NewDesc(MetricWaiting, "Executions waiting for a human now, by state (awaiting_approval: a reviewer; recovery_required: an operator). Read from the ledger.", []string{"state"}, nil),
		oldest: prometheus.NewDesc(MetricWaitingOldest, "How long the oldest execution in the state has waited, in seconds (0 when none). Read from the ledger.", []string{"state"}, nil),
		fenced: prometheus.NewDesc(MetricFenced, "Sessions fenced by recovery_required executions: their new calls are refused until an operator resolves them. Read from the ledger.", nil, nil),
	}
}

func (c *waitingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.oldest
	ch <- c.fenced
}

func (c *waitingCollector) Collect(ch chan<- prometheus.Metric) {
	if c.ex == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitingScrapeTimeout)
	defer cancel()
	s, err := waiting.Read(ctx, c.ex.Ledger())
	if err != nil {
		c.log.Warn("metrics: cannot read what waits from the ledger; the waiting gauges are left out of this scrape", "error", err)
		return
	}
	now := c.now()
	for _, st := range []struct {
		state ledger.State
		calls []waiting.Call
	}{{ledger.StateAwaitingApproval, s.Approvals}, {ledger.StateRecoveryRequired, s.Recoveries}} {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(len(st.calls)), string(st.state))
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, waiting.Oldest(st.calls, now).Seconds(), string(st.state))
	}
	ch <- prometheus.MustNewConstMetric(c.fenced, prometheus.GaugeValue, float64(len(s.Fenced())))
}
