package httpapi

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/ledger"
)

// Metric names exported by NewObserver and New.
const (
	MetricTransitions     = "connhost_execution_transitions_total"
	MetricConnectorCall   = "connhost_connector_call_duration_seconds"
	MetricLedgerWrite     = "connhost_ledger_write_duration_seconds"
	MetricPoolSize        = "connhost_connector_pool_size"
	MetricPoolInstances   = "connhost_connector_instances"
	MetricPoolCreated     = "connhost_connector_instances_created_total"
	MetricPoolDiscarded   = "connhost_connector_instances_discarded_total"
	MetricLogDropped      = "connhost_guest_log_dropped_records_total"
	MetricLogDroppedBytes = "connhost_guest_log_dropped_bytes_total"
	metricsNamespaceLabel = "connector"

	// Fleet mode (a shared ledger).
	MetricLeaseLive          = "connhost_fleet_lease_live"
	MetricLeaseEpoch         = "connhost_fleet_lease_epoch"
	MetricLeaseRegistrations = "connhost_fleet_lease_registrations_total"
	MetricLeaseRenewals      = "connhost_fleet_lease_renewals_total"
	MetricLeasesLost         = "connhost_fleet_leases_lost_total"
	MetricClaimed            = "connhost_fleet_claimed_executions_total"
	MetricTakeovers          = "connhost_fleet_takeovers_total"
)

type observer struct {
	transitions *prometheus.CounterVec
	calls       *prometheus.HistogramVec
	writes      prometheus.Histogram
	logDropped  *prometheus.CounterVec
	logBytes    *prometheus.CounterVec

	registrations prometheus.Counter
	renewals      *prometheus.CounterVec
	lost          prometheus.Counter
	claimed       prometheus.Counter
	takeovers     *prometheus.CounterVec
}

// NewObserver returns a host.Observer that exports the executor's
// measurements as Prometheus metrics registered on reg:
//
//   - connhost_execution_transitions_total{state,decision}: every
//     transition, by the state entered and the decision behind it;
//   - connhost_connector_call_duration_seconds{connector,operation,export,result}:
//     connector call latency, result "ok" or "error";
//   - connhost_ledger_write_duration_seconds: synced ledger transition
//     latency;
//   - connhost_guest_log_dropped_records_total{connector} and
//     connhost_guest_log_dropped_bytes_total{connector}: guest log records
//     dropped, and message bytes lost (dropped or cut), over a connector's
//     limits.log_records and limits.log_kib;
//   - on a shared (fleet) ledger: connhost_fleet_lease_registrations_total
//     (leases started: one at start, one after each lost lease),
//     connhost_fleet_lease_renewals_total{result} ("ok" or "failed"),
//     connhost_fleet_leases_lost_total (times the node stopped
//     dispatching), connhost_fleet_claimed_executions_total (executions
//     taken from nodes whose lease was gone) and
//     connhost_fleet_takeovers_total{decision} (the first decision
//     recorded on each claimed execution). New adds the gauges
//     connhost_fleet_lease_live{node} and connhost_fleet_lease_epoch{node}.
//
// Pass it as host.Options.Observer and the same reg as Options.Registry.
// It panics if the metrics are already registered on reg (like
// prometheus.MustRegister). It is safe for concurrent use.
func NewObserver(reg prometheus.Registerer) host.Observer {
	o := &observer{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricTransitions,
			Help: "Execution state transitions, by the state entered and the decision behind it.",
		}, []string{"state", "decision"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricConnectorCall,
			Help: "Latency of calls into connector modules.",
			// Warm calls cost microseconds; calls to providers seconds.
			Buckets: prometheus.ExponentialBucketsRange(10e-6, 30, 16),
		}, []string{"connector", "operation", "export", "result"}),
		writes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricLedgerWrite,
			Help:    "Latency of synced ledger transitions.",
			Buckets: prometheus.ExponentialBucketsRange(50e-6, 1, 14),
		}),
		logDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLogDropped,
			Help: "Guest log records dropped over the connector's limits.log_records or limits.log_kib.",
		}, []string{metricsNamespaceLabel}),
		logBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLogDroppedBytes,
			Help: "Guest log message bytes that did not reach the log (dropped or cut records).",
		}, []string{metricsNamespaceLabel}),
	}
	o.registrations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricLeaseRegistrations,
		Help: "Leases this node started on the shared ledger (at start, and after a lost lease).",
	})
	o.renewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricLeaseRenewals,
		Help: "Lease renewal attempts on the shared ledger, by result (ok, failed).",
	}, []string{"result"})
	o.lost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricLeasesLost,
		Help: "Times this node lost its lease and stopped dispatching.",
	})
	o.claimed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricClaimed,
		Help: "Pending executions this node claimed from nodes whose lease was gone.",
	})
	o.takeovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricTakeovers,
		Help: "Claimed executions on which this node recorded its first decision, by decision.",
	}, []string{"decision"})
	reg.MustRegister(o.transitions, o.calls, o.writes, o.logDropped, o.logBytes,
		o.registrations, o.renewals, o.lost, o.claimed, o.takeovers)
	return o
}

var _ host.FleetObserver = (*observer)(nil)

func (o *observer) LeaseRegistered(ledger.Lease) { o.registrations.Inc() }

func (o *observer) LeaseRenewal(ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	o.renewals.WithLabelValues(result).Inc()
}

func (o *observer) LeaseLost(ledger.Lease) { o.lost.Inc() }
func (o *observer) Claimed(n int)          { o.claimed.Add(float64(n)) }
func (o *observer) TookOver(decision string) {
	o.takeovers.WithLabelValues(decision).Inc()
}

func (o *observer) ConnectorCall(ctx context.Context, connector, operation, export string, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	observe(ctx, o.calls.WithLabelValues(connector, operation, export, result), d)
}

// observe records d in h, with the trace id of ctx's span as its exemplar
// when that span is sampled: a slow call found on a dashboard leads to its
// trace (exemplars are served in the OpenMetrics format of /metrics).
func observe(ctx context.Context, h prometheus.Observer, d time.Duration) {
	if traceID, _ := telemetry.IDs(ctx); traceID != "" {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(d.Seconds(), prometheus.Labels{"trace_id": traceID})
			return
		}
	}
	h.Observe(d.Seconds())
}

func (o *observer) LedgerWrite(ctx context.Context, d time.Duration) { observe(ctx, o.writes, d) }

func (o *observer) Transition(to ledger.State, decision string) {
	o.transitions.WithLabelValues(string(to), decision).Inc()
}

func (o *observer) GuestLogDropped(connector string, records, bytes int64) {
	o.logDropped.WithLabelValues(connector).Add(float64(records))
	o.logBytes.WithLabelValues(connector).Add(float64(bytes))
}

// poolCollector reports the instance pools of the executor's connectors at
// scrape time.
type poolCollector struct {
	ex        *host.Executor
	size      *prometheus.Desc
	instances *prometheus.Desc
	created   *prometheus.Desc
	discarded *prometheus.Desc
}

func newPoolCollector(ex *host.Executor) *poolCollector {
	return &poolCollector{
		ex:        ex,
		size:      prometheus.NewDesc(MetricPoolSize, "Connector instance pool cap (limits.instances).", []string{metricsNamespaceLabel}, nil),
		instances: prometheus.NewDesc(MetricPoolInstances, "Connector instances in the pool, by state (idle or busy).", []string{metricsNamespaceLabel, "state"}, nil),
		created:   prometheus.NewDesc(MetricPoolCreated, "Connector instances created.", []string{metricsNamespaceLabel}, nil),
		discarded: prometheus.NewDesc(MetricPoolDiscarded, "Connector instances discarded after a trap, timeout or error.", []string{metricsNamespaceLabel}, nil),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.instances
	ch <- c.created
	ch <- c.discarded
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	if c.ex == nil {
		return
	}
	for _, m := range c.ex.Manifests() {
		name := m.Connector.Name
		s, ok := c.ex.PoolStats(name)
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(s.Size), name)
		ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(s.Idle), name, "idle")
		ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(s.Busy), name, "busy")
		ch <- prometheus.MustNewConstMetric(c.created, prometheus.CounterValue, float64(s.Created), name)
		ch <- prometheus.MustNewConstMetric(c.discarded, prometheus.CounterValue, float64(s.Discarded), name)
	}
}

// leaseCollector reports the node's lease on a shared ledger at scrape
// time (nothing on a single-node ledger).
type leaseCollector struct {
	ex    *host.Executor
	live  *prometheus.Desc
	epoch *prometheus.Desc
}

func newLeaseCollector(ex *host.Executor) *leaseCollector {
	return &leaseCollector{
		ex:    ex,
		live:  prometheus.NewDesc(MetricLeaseLive, "1 while this node holds a live lease on the shared ledger (it takes new work), else 0.", []string{"node"}, nil),
		epoch: prometheus.NewDesc(MetricLeaseEpoch, "The epoch of this node's current lease on the shared ledger.", []string{"node"}, nil),
	}
}

func (c *leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.live
	ch <- c.epoch
}

func (c *leaseCollector) Collect(ch chan<- prometheus.Metric) {
	if c.ex == nil {
		return
	}
	l, live, ok := c.ex.NodeLease()
	if !ok {
		return
	}
	v := 0.0
	if live {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, v, l.Node)
	ch <- prometheus.MustNewConstMetric(c.epoch, prometheus.GaugeValue, float64(l.Epoch), l.Node)
}
