// Package notify tells humans that something waits for them: a call that
// awaits approval, one in recovery_required, a session it fences. A
// Notifier queues each Notice and delivers it, in a goroutine of its own,
// to its channels: a webhook signed as Standard Webhooks specifies
// (https://www.standardwebhooks.com: webhook-id, webhook-timestamp,
// webhook-signature "v1,<base64 HMAC-SHA256>"), and, under connhost dev,
// an e-mail through the local Mailpit's send API.
//
// Nothing here may slow a call down: Notify never blocks. A Notice that
// finds the queue full is dropped, logged and counted
// (connhost_notifications_total{outcome="dropped"}); a delivery that
// fails is retried with backoff a bounded number of times, then logged
// and counted as failed. What waits stays in the ledger either way: the
// log, the gauges and the console still show it.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connhost/connhost/internal/waiting"
	"github.com/connhost/connhost/ledger"
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
}

// ID is the notice's webhook-id: the same for every delivery of one wait
// (its retries, and the same wait seen by another node of a fleet, or
// again after a restart), another for each new wait. Receivers
// deduplicate on it, as the Standard Webhooks spec says.
func (n Notice) ID() string {
	key := n.ExecutionID
	if n.Type == TypeSessionFenced {
		key = n.Namespace + "\x00" + n.SessionID + "\x00" + strings.Join(n.Calls, ",")
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
	// QueueSize bounds the notices waiting per channel. The default
	// value is 256.
	QueueSize int
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

// Notifier delivers notices to its channels, each from a queue of its
// own worked by one goroutine, in order. It is safe for concurrent use.
type Notifier struct {
	o       Options
	queues  []queue
	outcome *prometheus.CounterVec
	wg      sync.WaitGroup
}

type queue struct {
	ch Channel
	q  chan Notice
}

// New returns a Notifier delivering to channels; Start it.
func New(o Options, channels ...Channel) (*Notifier, error) {
	o.EnsureDefaults()
	n := &Notifier{o: o, outcome: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "connhost_notifications_total",
		Help: "Notifications of what waits for a human, by channel and outcome (delivered, retried, failed, dropped).",
	}, []string{"channel", "outcome"})}
	for _, c := range channels {
		n.queues = append(n.queues, queue{ch: c, q: make(chan Notice, o.QueueSize)})
		for _, oc := range []string{"delivered", "retried", "failed", "dropped"} {
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

// Notify queues notice for every channel, never blocking: a full queue
// drops it, with a log line and a count.
func (n *Notifier) Notify(notice Notice) {
	for _, q := range n.queues {
		select {
		case q.q <- notice:
		default:
			n.outcome.WithLabelValues(q.ch.Name(), "dropped").Inc()
			n.o.Logger.Warn("notification dropped: its queue is full (the receiver is slow or down)", "channel", q.ch.Name(),
				"type", notice.Type, "execution_id", notice.ExecutionID, "session_id", notice.SessionID, "webhook_id", notice.ID())
		}
	}
}

func (n *Notifier) work(ctx context.Context, q queue) {
	for {
		select {
		case <-ctx.Done():
			return
		case notice := <-q.q:
			n.deliver(ctx, q.ch, notice)
		}
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
