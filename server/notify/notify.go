// Package notify tells humans that something waits for them: a call that
// awaits approval, one in recovery_required, a session it fences. A
// Notifier queues each Notice and delivers it, in a goroutine of its own,
// to its channels: a webhook signed as Standard Webhooks specifies
// (https://www.standardwebhooks.com: webhook-id, webhook-timestamp,
// webhook-signature "v1,<base64 HMAC-SHA256>"), and, under connhost dev,
// an e-mail through the local Mailpit's send API.
//
// Nothing here may slow a call down: Notify never blocks. Each channel
// keeps a queue per namespace and delivers from them in turn, one notice
// of each namespace that has any, so that one tenant's flood delays
// another's notice by one delivery at most. A notice that finds its
// namespace's queue full is not dropped but coalesced: counted by type,
// logged once per burst (connhost_notifications_total{outcome=
// "coalesced"}), and told in one summary notice (TypeCoalesced: "N calls
// await approval in namespace X") once that queue has drained. A delivery
// that fails is retried with backoff a bounded number of times, then
// logged and counted as failed. What waits stays in the ledger either
// way: the log, the gauges and the console still show it.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/waiting"
)

// The event types of a Notice.
const (
	// TypeAwaitingApproval: a call awaits a reviewer's approval.
	TypeAwaitingApproval = "execution.awaiting_approval"
	// TypeRecoveryRequired: a call's outcome is unknown and an operator
	// must resolve it.
	TypeRecoveryRequired = "execution.recovery_required"
	// TypeSessionFenced: a session refuses new calls until an operator
	// resolves its recovery_required calls.
	TypeSessionFenced = "session.fenced"
	// TypeCoalesced: notices of one namespace that did not fit its
	// queue, told together once the queue has drained: Coalesced counts
	// them by type (how many calls started to await approval, to need an
	// operator, how many sessions were fenced), Since is when the first
	// of them came.
	TypeCoalesced = "namespace.notices_coalesced"
)

// Notice is one thing that started to wait for a human. It is the data
// member of the webhook's body.
type Notice struct {
	// Type is one of the Type constants (not in data: the body's type).
	Type        string `json:"-"`
	ExecutionID string `json:"execution_id,omitempty"`
	ApprovalID  string `json:"approval_id,omitempty"`
	// Tool is "connector.operation".
	Tool      string `json:"tool,omitempty"`
	Namespace string `json:"namespace"`
	SessionID string `json:"session_id"`
	// State is the execution's state (awaiting_approval,
	// recovery_required); empty for a fenced session.
	State string `json:"state,omitempty"`
	// Since is when it started to wait.
	Since time.Time `json:"since"`
	// ExpiresAt is when a pending approval expires.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Why is why recovery stopped (recovery_required).
	Why string `json:"why,omitempty"`
	// Calls are the ids of the calls that fence a session.
	Calls []string `json:"calls,omitempty"`
	// ConsoleURL is the console page a human acts on it from.
	ConsoleURL string `json:"console_url"`
	// Command is the CLI line that acts on it.
	Command string `json:"command,omitempty"`
	// Coalesced counts, by type, the notices of the namespace that its
	// queue did not hold (TypeCoalesced only).
	Coalesced map[string]int `json:"coalesced,omitempty"`
}

// ID is the notice's webhook-id: the same for every delivery of one wait
// (its retries, and the same wait seen by another node of a fleet, or
// again after a restart), another for each new wait. Receivers
// deduplicate on it, as the Standard Webhooks spec says.
func (n Notice) ID() string {
	key := n.ExecutionID
	switch n.Type {
	case TypeSessionFenced:
		key = n.Namespace + "\x00" + n.SessionID + "\x00" + strings.Join(n.Calls, ",")
	case TypeCoalesced:
		key = n.Namespace + "\x00" + fmt.Sprint(n.Coalesced)
	}
	sum := sha256.Sum256([]byte(n.Type + "\x00" + key + "\x00" + n.Since.UTC().Format(time.RFC3339Nano)))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// Subject is a one-line summary of n, for an e-mail subject or a chat.
func (n Notice) Subject() string {
	switch n.Type {
	case TypeAwaitingApproval:
		return fmt.Sprintf("connhost: %s awaits approval (session %s)", n.Tool, n.SessionID)
	case TypeRecoveryRequired:
		return fmt.Sprintf("connhost: %s needs an operator: recovery_required (session %s)", n.Tool, n.SessionID)
	case TypeSessionFenced:
		return fmt.Sprintf("connhost: session %s is fenced until an operator resolves its calls", n.SessionID)
	case TypeCoalesced:
		var parts []string
		for _, k := range []struct{ typ, one, many string }{
			{TypeAwaitingApproval, "call awaits approval", "calls await approval"},
			{TypeRecoveryRequired, "call needs an operator", "calls need an operator"},
			{TypeSessionFenced, "session is fenced", "sessions are fenced"},
		} {
			switch c := n.Coalesced[k.typ]; c {
			case 0:
			case 1:
				parts = append(parts, "1 more "+k.one)
			default:
				parts = append(parts, fmt.Sprintf("%d more %s", c, k.many))
			}
		}
		return fmt.Sprintf("connhost: %s in namespace %s (too many to tell one by one)", strings.Join(parts, ", "), n.Namespace)
	}
	return "connhost: " + n.Type
}

// body is the webhook's JSON body, in the Standard Webhooks payload
// structure.
type body struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Notice    `json:"data"`
}

// Body returns the JSON body of n's webhook.
func (n Notice) Body() ([]byte, error) {
	return json.Marshal(body{Type: n.Type, Timestamp: n.Since.UTC(), Data: n})
}

// Channel delivers a notice once. An error that is Permanent is not
// retried.
type Channel interface {
	// Name names the channel in logs and metrics ("webhook", "email").
	Name() string
	Deliver(ctx context.Context, n Notice) error
}

// permanentError is a failure a retry cannot mend.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as a failure a retry cannot mend (a 4xx answer, a
// redirect, a refused host).
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool { return errors.As(err, new(permanentError)) }

// Options configure a Notifier.
type Options struct {
	// Logger receives a line per failed, retried and dropped delivery.
	Logger *slog.Logger
	// Registry, if set, receives connhost_notifications_total{channel,
	// outcome}.
	Registry prometheus.Registerer
	// QueueSize bounds the notices waiting per namespace and channel;
	// what does not fit is coalesced into one summary. The default value
	// is 256.
	QueueSize int
	// PublicURL is the server's public URL (without a trailing slash):
	// a summary (TypeCoalesced) links to the namespace's inbox under it.
	// The default value ("") gives a summary no link.
	PublicURL string
	// MaxAttempts bounds the deliveries of one notice. The default value
	// is 8.
	MaxAttempts int
	// Backoff is the wait before the second delivery; it doubles for
	// each next one, up to MaxBackoff. The default value is 1s.
	Backoff time.Duration
	// MaxBackoff caps the wait between two deliveries. The default
	// value is 5m.
	MaxBackoff time.Duration
}

// EnsureDefaults fills the unset fields of o with their default values.
func (o *Options) EnsureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 256
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
}

// Notifier delivers notices to its channels, each from queues of its
// own (one per namespace, worked in turn) by one goroutine. It is safe for
// concurrent use.
type Notifier struct {
	o       Options
	queues  []*queue
	outcome *prometheus.CounterVec
	wg      sync.WaitGroup
}

// queue is one channel's notices: a FIFO per namespace, and the order in
// which the namespaces that have notices take their turns.
type queue struct {
	ch   Channel
	wake chan struct{}

	mu   sync.Mutex
	byNS map[string]*nsQueue
	// turns are the namespaces with notices, in the order of their
	// turns; next is the index of the next one.
	turns []string
	next  int
}

// nsQueue is one namespace's notices on one channel.
type nsQueue struct {
	notices []Notice
	// held counts, by type, the notices that did not fit since the last
	// summary; since is when the first of them came.
	held  map[string]int
	since time.Time
}

// New returns a Notifier delivering to channels; Start it.
func New(o Options, channels ...Channel) (*Notifier, error) {
	o.EnsureDefaults()
	n := &Notifier{o: o, outcome: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "connhost_notifications_total",
		Help: "Notifications of what waits for a human, by channel and outcome (delivered, retried, failed, coalesced into a later summary, dropped).",
	}, []string{"channel", "outcome"})}
	for _, c := range channels {
		n.queues = append(n.queues, &queue{ch: c, wake: make(chan struct{}, 1), byNS: map[string]*nsQueue{}})
		for _, oc := range []string{"delivered", "retried", "failed", "coalesced", "dropped"} {
			n.outcome.WithLabelValues(c.Name(), oc)
		}
	}
	if o.Registry != nil {
		if err := o.Registry.Register(n.outcome); err != nil {
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	return n, nil
}

// Start works the queues until ctx is done; what is still queued then is
// dropped (a notice is no record: the ledger keeps what waits).
func (n *Notifier) Start(ctx context.Context) {
	for _, q := range n.queues {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.work(ctx, q)
		}()
	}
}

// Wait returns once every queue has stopped (after Start's ctx is done).
func (n *Notifier) Wait() { n.wg.Wait() }

// Notify queues notice for every channel, never blocking. A notice that
// finds its namespace's queue full is coalesced: counted, and told in the
// summary that follows once the queue has drained.
func (n *Notifier) Notify(notice Notice) {
	for _, q := range n.queues {
		queued, first := q.add(notice, n.o.QueueSize)
		if queued {
			continue
		}
		n.outcome.WithLabelValues(q.ch.Name(), "coalesced").Inc()
		if first {
			n.o.Logger.Warn("notifications coalesced: the namespace's queue is full (a flood of its calls, or a slow receiver); its further notices are counted and told in one summary once the queue drains",
				"channel", q.ch.Name(), "namespace", notice.Namespace, "queue", n.o.QueueSize, "type", notice.Type, "execution_id", notice.ExecutionID)
		}
	}
}

// add queues notice, or counts it among the held ones when its
// namespace's queue holds size notices; it reports whether it queued it,
// and whether it is the first held since the namespace's last summary.
func (q *queue) add(notice Notice, size int) (queued, first bool) {
	q.mu.Lock()
	defer func() {
		q.mu.Unlock()
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}()
	nq := q.byNS[notice.Namespace]
	if nq == nil {
		nq = &nsQueue{}
		q.byNS[notice.Namespace] = nq
		q.turns = append(q.turns, notice.Namespace)
	}
	if len(nq.notices) < size {
		nq.notices = append(nq.notices, notice)
		return true, false
	}
	if nq.held == nil {
		nq.held, nq.since, first = map[string]int{}, notice.Since, true
	}
	nq.held[notice.Type]++
	return false, first
}

// take returns the next notice to deliver: the head of the queue of the
// namespace whose turn it is, or, once that queue has drained, the
// summary of what it held meanwhile.
func (q *queue) take(base string) (Notice, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.turns) > 0 {
		if q.next >= len(q.turns) {
			q.next = 0
		}
		ns := q.turns[q.next]
		nq := q.byNS[ns]
		if len(nq.notices) == 0 && nq.held != nil {
			nq.notices = append(nq.notices, summary(ns, nq.held, nq.since, base))
			nq.held = nil
		}
		if len(nq.notices) == 0 {
			// Nothing left of this namespace: it leaves the turns.
			delete(q.byNS, ns)
			q.turns = slices.Delete(q.turns, q.next, q.next+1)
			continue
		}
		notice := nq.notices[0]
		nq.notices[0] = Notice{}
		nq.notices = nq.notices[1:]
		q.next++
		return notice, true
	}
	return Notice{}, false
}

// summary is the notice of the held notices of namespace ns.
func summary(ns string, held map[string]int, since time.Time, base string) Notice {
	n := Notice{Type: TypeCoalesced, Namespace: ns, Since: since, Coalesced: maps.Clone(held),
		Command: "connhost ls --state awaiting_approval --order expiry --namespace " + ns}
	if base != "" {
		n.ConsoleURL = base + consoleApprovals + "?namespace=" + url.QueryEscape(ns)
	}
	return n
}

func (n *Notifier) work(ctx context.Context, q *queue) {
	for {
		notice, ok := q.take(n.o.PublicURL)
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		n.deliver(ctx, q.ch, notice)
	}
}

// deliver delivers notice through ch, retrying with backoff.
func (n *Notifier) deliver(ctx context.Context, ch Channel, notice Notice) {
	wait := n.o.Backoff
	for attempt := 1; ; attempt++ {
		err := ch.Deliver(ctx, notice)
		if err == nil {
			n.outcome.WithLabelValues(ch.Name(), "delivered").Inc()
			return
		}
		if ctx.Err() != nil {
			return
		}
		attrs := []any{"channel", ch.Name(), "type", notice.Type, "execution_id", notice.ExecutionID,
			"session_id", notice.SessionID, "webhook_id", notice.ID(), "attempt", attempt, "error", err}
		if IsPermanent(err) || attempt >= n.o.MaxAttempts {
			n.outcome.WithLabelValues(ch.Name(), "failed").Inc()
			n.o.Logger.Error("notification not delivered", attrs...)
			return
		}
		n.outcome.WithLabelValues(ch.Name(), "retried").Inc()
		n.o.Logger.Warn("notification delivery failed: retrying", append(attrs, "retry_in", wait)...)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, n.o.MaxBackoff)
	}
}

// The console's pages a notice links to, under the server's public URL.
const (
	consoleRecovery   = "/ui/recovery"
	consoleExecutions = "/ui/executions/"
	consoleApprovals  = "/ui/approvals"
)

// FromWait is the notice of w, linking to the console under base (the
// server's public URL, without a trailing slash).
func FromWait(w waiting.Wait, base string) Notice {
	if f := w.Session; f != nil {
		return Notice{Type: TypeSessionFenced, Namespace: f.Namespace, SessionID: f.SessionID, Calls: slices.Clone(f.Calls),
			Since: w.Since, ConsoleURL: base + consoleRecovery, Command: "connhost ls --state recovery_required"}
	}
	c := w.Call
	n := Notice{ExecutionID: c.ID, Tool: c.Tool, Namespace: c.Namespace, SessionID: c.SessionID, State: string(c.State),
		Since: c.Since, ConsoleURL: base + consoleExecutions + url.PathEscape(c.ID)}
	switch c.State {
	case ledger.StateAwaitingApproval:
		n.Type, n.ApprovalID, n.Command = TypeAwaitingApproval, c.ApprovalID, "connhost approve "+c.ApprovalID
		if !c.ExpiresAt.IsZero() {
			e := c.ExpiresAt.UTC()
			n.ExpiresAt = &e
		}
	default:
		n.Type, n.Why, n.Command = TypeRecoveryRequired, w.Why, "connhost history "+c.ID+", then connhost resolve "+c.ID
	}
	return n
}
