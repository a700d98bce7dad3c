package waiting

import (
	"context"
	"log/slog"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// DefaultPoll is how often an Announcer reads the ledger without being
// woken: what other processes sharing the ledger (a fleet's nodes) made
// wait reaches the log within it.
const DefaultPoll = 10 * time.Second

// maxListed caps the calls the startup summary names one by one, per
// state; the rest are counted.
const maxListed = 10

// Announcer logs what waits for a human: a summary when it starts, then
// one line per call as it starts to wait — INFO for a call awaiting
// approval, WARN for one in recovery_required and for the session it
// fences — and one when a fenced session is free again. Each line carries
// the ids and the command a human acts with.
//
// The lines come from reading the ledger (see Read), woken by every
// transition into a waiting state that the executor reports to the
// Observer it wraps, and every Poll otherwise. An Announcer is safe for
// concurrent use; Start it once.
type Announcer struct {
	log  *slog.Logger
	kick chan struct{}
	// Poll is how often the ledger is read without a wake-up. The
	// default value is DefaultPoll.
	Poll time.Duration
	// Now is the clock of the ages logged. The default value is
	// time.Now.
	Now func() time.Time
	// OnWait, if set, is called with each call or session as it is
	// announced to start waiting (never for the startup summary: what
	// waited before a restart was told then), from the Announcer's
	// goroutine: it must not block. The default value is nil.
	OnWait func(Wait)

	known  map[string]ledger.State
	fenced map[[2]string]bool
}

// Wait is one call or session that started to wait for a human, as an
// Announcer announces it.
type Wait struct {
	// Call is a call that awaits approval or needs an operator; nil for
	// a fenced session.
	Call *Call
	// Why is why recovery stopped, for a recovery_required call ("" if
	// the trail cannot be read).
	Why string
	// Session is a session fenced; nil for a call.
	Session *Session
	// Since is when it started to wait (a session: when its oldest
	// fencing call did).
	Since time.Time
}

// NewAnnouncer returns an Announcer logging to logger.
func NewAnnouncer(logger *slog.Logger) *Announcer {
	return &Announcer{log: logger, kick: make(chan struct{}, 1), Poll: DefaultPoll, Now: time.Now}
}

// Observer returns inner (nil: none) with every transition into
// awaiting_approval or recovery_required also waking the Announcer. It
// keeps inner's host.FleetObserver methods, if it has them.
func (a *Announcer) Observer(inner host.Observer) host.Observer {
	if inner == nil {
		inner = nopObserver{}
	}
	o := observer{Observer: inner, a: a}
	if fo, ok := inner.(host.FleetObserver); ok {
		return fleetObserver{observer: o, FleetObserver: fo}
	}
	return o
}

func (a *Announcer) wake() {
	select {
	case a.kick <- struct{}{}:
	default: // a read is due already
	}
}

// Start logs the summary of what waits in led now (as a server starts, a
// restarted one included), and announces each call that starts to wait
// from then on, until ctx is done.
func (a *Announcer) Start(ctx context.Context, led ledger.Ledger) {
	s, err := Read(ctx, led)
	if err != nil {
		a.log.Error("cannot read what waits for a reviewer or an operator", "error", err)
	} else {
		a.summarize(s)
		a.remember(s)
	}
	go a.run(ctx, led, err == nil)
}

func (a *Announcer) run(ctx context.Context, led ledger.Ledger, primed bool) {
	t := time.NewTicker(a.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-t.C:
		}
		s, err := Read(ctx, led)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("cannot read what waits for a reviewer or an operator", "error", err)
			}
			continue
		}
		if !primed {
			a.summarize(s)
			a.remember(s)
			primed = true
			continue
		}
		a.announce(ctx, led, s)
	}
}

// summarize logs what waits: one line with the counts and ages, then the
// oldest calls one by one.
func (a *Announcer) summarize(s Summary) {
	now := a.Now()
	fenced := s.Fenced()
	if len(s.Approvals) == 0 && len(s.Recoveries) == 0 {
		a.log.Info("nothing waits for a reviewer or an operator")
		return
	}
	level := slog.LevelInfo
	if len(s.Recoveries) > 0 {
		level = slog.LevelWarn
	}
	a.log.Log(context.Background(), level, "waiting for a human",
		"awaiting_approval", len(s.Approvals), "oldest_approval_age", age(Oldest(s.Approvals, now)),
		"recovery_required", len(s.Recoveries), "oldest_recovery_age", age(Oldest(s.Recoveries, now)),
		"fenced_sessions", len(fenced))
	for i, c := range s.Approvals {
		if i == maxListed {
			a.log.Info("more calls await approval", "count", len(s.Approvals)-i, "list", "connhost ls --state awaiting_approval")
			break
		}
		a.approval(c, now)
	}
	for i, c := range s.Recoveries {
		if i == maxListed {
			a.log.Warn("more calls need an operator", "count", len(s.Recoveries)-i, "list", "connhost ls --state recovery_required")
			break
		}
		a.recovery(c, "", now)
	}
	for _, f := range fenced {
		a.fence(f)
	}
}

// remember takes s as what has been announced.
func (a *Announcer) remember(s Summary) {
	a.known = map[string]ledger.State{}
	for _, c := range s.Approvals {
		a.known[c.ID] = c.State
	}
	for _, c := range s.Recoveries {
		a.known[c.ID] = c.State
	}
	a.fenced = map[[2]string]bool{}
	for _, f := range s.Fenced() {
		a.fenced[[2]string{f.Namespace, f.SessionID}] = true
	}
}

// announce logs what waits in s and did not at the last read, and the
// sessions no longer fenced.
func (a *Announcer) announce(ctx context.Context, led ledger.Ledger, s Summary) {
	now := a.Now()
	for _, c := range s.Approvals {
		if a.known[c.ID] != c.State {
			a.approval(c, now)
			a.told(Wait{Call: &c, Since: c.Since})
		}
	}
	since := map[string]time.Time{}
	for _, c := range s.Recoveries {
		since[c.ID] = c.Since
		if a.known[c.ID] != c.State {
			w := why(ctx, led, c.ID)
			a.recovery(c, w, now)
			a.told(Wait{Call: &c, Why: w, Since: c.Since})
		}
	}
	was := a.fenced
	a.remember(s)
	for _, f := range s.Fenced() {
		if !was[[2]string{f.Namespace, f.SessionID}] {
			a.fence(f)
			a.told(Wait{Session: &f, Since: since[f.Calls[0]]})
		}
	}
	for k := range was {
		if !a.fenced[k] {
			a.log.Info("session no longer fenced: it takes new calls again", "namespace", k[0], "session_id", k[1])
		}
	}
}

func (a *Announcer) told(w Wait) {
	if a.OnWait != nil {
		a.OnWait(w)
	}
}

func (a *Announcer) approval(c Call, now time.Time) {
	a.log.Info("call awaits approval", "execution_id", c.ID, "approval_id", c.ApprovalID, "tool", c.Tool,
		"namespace", c.Namespace, "session_id", c.SessionID, "waiting", age(now.Sub(c.Since)),
		"expires_at", c.ExpiresAt.UTC().Format(time.RFC3339), "review", "connhost approve "+c.ApprovalID)
}

func (a *Announcer) recovery(c Call, why string, now time.Time) {
	attrs := []any{"execution_id", c.ID, "tool", c.Tool, "namespace", c.Namespace, "session_id", c.SessionID,
		"attempt", c.Attempt, "uncertain", c.Uncertain, "waiting", age(now.Sub(c.Since))}
	if why != "" {
		attrs = append(attrs, "why", why)
	}
	attrs = append(attrs, "resolve", "connhost history "+c.ID+", then connhost resolve "+c.ID)
	a.log.Warn("call needs an operator: recovery_required", attrs...)
}

func (a *Announcer) fence(f Session) {
	a.log.Warn("session fenced: its new calls are refused until an operator resolves its recovery_required calls",
		"namespace", f.Namespace, "session_id", f.SessionID, "calls", f.Calls)
}

// why is the evidence of the transition that made the call wait, or its
// decision ("" if the trail cannot be read).
func why(ctx context.Context, led ledger.Ledger, id string) string {
	evs, err := led.Events(ctx, id)
	if err != nil || len(evs) == 0 {
		return ""
	}
	last := evs[len(evs)-1]
	if last.Evidence != "" {
		return last.Decision + ": " + last.Evidence
	}
	return last.Decision
}

// age rounds d for a log line.
func age(d time.Duration) time.Duration {
	return max(d, 0).Round(time.Second)
}

type observer struct {
	host.Observer
	a *Announcer
}

func (o observer) Transition(to ledger.State, decision string) {
	o.Observer.Transition(to, decision)
	if to == ledger.StateAwaitingApproval || to == ledger.StateRecoveryRequired {
		o.a.wake()
	}
}

type fleetObserver struct {
	observer
	host.FleetObserver
}

type nopObserver struct{}

func (nopObserver) ConnectorCall(context.Context, string, string, string, time.Duration, error) {}
func (nopObserver) LedgerWrite(context.Context, time.Duration)                                  {}
func (nopObserver) Transition(ledger.State, string)                                             {}
func (nopObserver) GuestLogDropped(string, int64, int64)                                        {}
