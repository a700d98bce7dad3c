package host_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.StopSharedPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

// fleet is several executors (nodes) on one PostgreSQL ledger, calling
// one provider through the "effect" connector.
type fleet struct {
	t   *testing.T
	h   *harness // provider, clock and manifest; its own executor unused
	dsn string
}

func newFleet(t *testing.T, policy string, opts ...harnessOpt) *fleet {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), prov: newProvider(t), policy: policy, attempts: 3,
		now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	for _, o := range opts {
		o(h)
	}
	return &fleet{t: t, h: h, dsn: testenv.NewPostgresDatabase(t)}
}

// ritaToken is the token of the fleet's approver, rita: every node holds
// her key, as every node of a deployment reads the same config.
const ritaToken = "tok-rita-0123456789abcdef"

// start opens node name: an executor on its own connection pool to the
// shared ledger, with a lease that lasts an hour unless a test ends it.
func (f *fleet) start(name string, obs host.Observer) *host.Executor {
	f.t.Helper()
	return f.startWith(name, obs, map[string][]byte{"rita": host.ApprovalKey(ritaToken)})
}

// startWith is start with the approval keys keys.
func (f *fleet) startWith(name string, obs host.Observer, keys map[string][]byte) *host.Executor {
	f.t.Helper()
	return f.startOn(name, obs, keys, func(db *pgledger.DB) ledger.Fleet { return db })
}

// startOn is startWith on the fleet ledger wrap makes of the node's own.
func (f *fleet) startOn(name string, obs host.Observer, keys map[string][]byte, wrap func(*pgledger.DB) ledger.Fleet) *host.Executor {
	f.t.Helper()
	return f.startAdjusted(name, wrap, func(o *host.Options) { o.Observer, o.ApprovalKeys = obs, keys })
}

// startAdjusted opens node name on the fleet ledger wrap makes of the
// node's own, with the options adjust sets; its journal of consumed
// approvals is a directory of its own unless adjust names one.
func (f *fleet) startAdjusted(name string, wrap func(*pgledger.DB) ledger.Fleet, adjust func(*host.Options)) *host.Executor {
	f.t.Helper()
	ctx := context.Background()
	db, err := pgledger.Open(ctx, pgledger.Options{DSN: f.dsn, Now: f.h.clock, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(f.t, err)
	led := wrap(db)
	o := f.h.options()
	o.Ledger, o.Node, o.LeaseTTL = led, name, time.Hour
	o.ConsumedDir = f.t.TempDir()
	adjust(&o)
	ex, err := host.Open(ctx, o)
	require.NoError(f.t, err)
	f.t.Cleanup(func() {
		_ = ex.Close(ctx)
		_ = led.Close()
	})
	return ex
}

// trail is an execution's audit trail as decision>state#attempt@actor.
func trail(t *testing.T, ex *host.Executor, id string) []string {
	t.Helper()
	_, evs, err := ex.Get(context.Background(), id)
	require.NoError(t, err)
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprintf("%s>%s#%d@%s", ev.Decision, ev.To, ev.Attempt, ev.Actor)
	}
	return out
}

func lastEvent(t *testing.T, ex *host.Executor, id string) ledger.Event {
	t.Helper()
	_, evs, err := ex.Get(context.Background(), id)
	require.NoError(t, err)
	return evs[len(evs)-1]
}

// fleetEvents records what a node's FleetObserver is told.
type fleetEvents struct {
	host.Observer
	mu                        sync.Mutex
	registered, lost, claimed int
	renewals, renewalsFailed  int
	tookOver                  []string
}

func newFleetEvents() *fleetEvents { return &fleetEvents{Observer: nopObserver{}} }

func (o *fleetEvents) LeaseRegistered(ledger.Lease) { o.mu.Lock(); o.registered++; o.mu.Unlock() }
func (o *fleetEvents) LeaseLost(ledger.Lease)       { o.mu.Lock(); o.lost++; o.mu.Unlock() }
func (o *fleetEvents) Claimed(n int)                { o.mu.Lock(); o.claimed += n; o.mu.Unlock() }
func (o *fleetEvents) TookOver(d string) {
	o.mu.Lock()
	o.tookOver = append(o.tookOver, d)
	o.mu.Unlock()
}
func (o *fleetEvents) LeaseRenewal(ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ok {
		o.renewals++
	} else {
		o.renewalsFailed++
	}
}

type nopObserver struct{}

func (nopObserver) ConnectorCall(context.Context, string, string, string, time.Duration, error) {}
func (nopObserver) LedgerWrite(context.Context, time.Duration)                                  {}
func (nopObserver) Transition(ledger.State, string)                                             {}
func (nopObserver) GuestLogDropped(string, int64, int64)                                        {}

// TestFleetTakeover: node a dies after the provider applied a call and
// before the outcome was recorded. While a's lease lasts, node b leaves
// the call alone (it answers pending and calls nothing); once the lease is
// gone, b claims the call and applies the decision table under the call's
// policy, and the audit trail names b and where the call came from.
func TestFleetTakeover(t *testing.T) {
	for _, tc := range []struct {
		policy   string
		opts     []harnessOpt
		decision string
		status   host.Status
	}{
		{"idempotent-retry", []harnessOpt{withDedup()}, "recover_retry", host.StatusSucceeded},
		{"reconcile", nil, "reconciled_applied", host.StatusSucceeded},
		{"manual", nil, "manual_policy", host.StatusRecoveryRequired},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			ctx := context.Background()
			f := newFleet(t, tc.policy, tc.opts...)
			a := f.start("a", nil)
			obs := newFleetEvents()
			b := f.start("b", obs)
			c := call("s1", "c1", `{"n":1}`)
			f.h.crashDuring(crash.AfterPluginReturn, func() { _, _ = a.Execute(ctx, c) })
			host.FreezeNode(a) // a is dead: its lease runs out
			require.Equal(t, 1, f.h.prov.count())

			rep, err := b.Recover(ctx)
			require.NoError(t, err)
			require.Zero(t, rep.Claimed, "a's lease is live")
			res, err := b.Execute(ctx, c)
			require.NoError(t, err)
			require.Equal(t, host.StatusPending, res.Status, "another live node owns the attempt")
			require.Equal(t, 1, f.h.prov.count())
			require.Equal(t, []string{"dispatch>dispatched#1@executor@a#1"}, trail(t, b, res.ExecutionID))

			testenv.ExpireNodeLease(t, f.dsn, "a")
			rep, err = b.Recover(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Claimed)
			res, err = b.Execute(ctx, c)
			require.NoError(t, err)
			require.Equal(t, tc.status, res.Status)
			require.Equal(t, 1, f.h.prov.count(), "one effect")
			tr := trail(t, b, res.ExecutionID)
			require.Equal(t, "dispatch>dispatched#1@executor@a#1", tr[0])
			require.True(t, strings.HasPrefix(tr[1], tc.decision+">"), "%v", tr)
			require.True(t, strings.HasSuffix(tr[1], "@recovery@b#1"), "%v", tr)
			_, evs, err := b.Get(ctx, res.ExecutionID)
			require.NoError(t, err)
			require.Contains(t, evs[1].Reason, "taken over from node a epoch 1 (lease gone) by node b epoch 1")
			for _, ev := range evs[2:] {
				require.NotContains(t, ev.Reason, "taken over", "only the first decision after the claim carries the note")
			}
			require.Equal(t, 1, obs.claimed)
			require.Equal(t, []string{tc.decision}, obs.tookOver)
		})
	}
}

// TestFleetTakeoverNamedWithoutTheClaim: the claim that made node b the
// owner of a dead node's call is one statement whose answer b may never
// see (the connection drops after the commit). b's decision on the call
// still names the takeover: the trail's dispatch says which lease the
// attempt ran under.
func TestFleetTakeoverNamedWithoutTheClaim(t *testing.T) {
	for _, tc := range []struct {
		policy   string
		opts     []harnessOpt
		decision string
	}{
		{"idempotent-retry", []harnessOpt{withDedup()}, "recover_retry"},
		{"reconcile", nil, "reconciled_applied"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			ctx := context.Background()
			f := newFleet(t, tc.policy, tc.opts...)
			a := f.start("a", nil)
			obs := newFleetEvents()
			b := f.start("b", obs)
			c := call("s1", "c1", `{"n":1}`)
			f.h.crashDuring(crash.AfterPluginReturn, func() { _, _ = a.Execute(ctx, c) })
			host.FreezeNode(a)
			testenv.ExpireNodeLease(t, f.dsn, "a")

			// The claim, made under b's lease behind b's back.
			lb, live, ok := b.NodeLease()
			require.True(t, ok && live)
			led, err := pgledger.Open(ctx, pgledger.Options{DSN: f.dsn, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			defer led.Close()
			claims, err := led.ClaimExpired(ctx, lb)
			require.NoError(t, err)
			require.Len(t, claims, 1)

			res, err := b.Execute(ctx, c)
			require.NoError(t, err)
			require.Equal(t, host.StatusSucceeded, res.Status)
			require.Equal(t, 1, f.h.prov.count(), "one effect")
			_, evs, err := b.Get(ctx, res.ExecutionID)
			require.NoError(t, err)
			require.Equal(t, tc.decision, evs[1].Decision)
			require.Equal(t, "recovery@b#1", evs[1].Actor)
			require.Contains(t, evs[1].Reason, "taken over from node a epoch 1 (lease gone) by node b epoch 1")
			for _, ev := range evs[2:] {
				require.NotContains(t, ev.Reason, "taken over", "only the first decision after the claim carries the note")
			}
			require.Zero(t, obs.claimed, "b never saw the claim")
			require.Equal(t, []string{tc.decision}, obs.tookOver)
		})
	}
}

// answer is what an Execute running in the background returned.
type answer struct {
	res host.Result
	err error
}

// pauseMidCall runs c on node a until the provider holds its request,
// pauses a (no renewals) past its lease, and lets node b claim the call.
// a's Execute goes on in the background; its answer arrives on the channel
// once the held request is released.
func (f *fleet) pauseMidCall(a, b *host.Executor, c host.ToolCall) <-chan answer {
	f.t.Helper()
	ctx := context.Background()
	f.h.prov.inject("hold")
	done := make(chan answer, 1)
	go func() {
		res, err := a.Execute(ctx, c)
		done <- answer{res, err}
	}()
	f.h.prov.waitHeld(f.t)
	require.Equal(f.t, 1, f.takeOver(a, b).Claimed)
	return done
}

// takeOver pauses node a (no renewals) past its lease and runs node b's
// recovery, which claims a's unfinished calls. It returns b's report.
func (f *fleet) takeOver(a, b *host.Executor) host.RecoveryReport {
	f.t.Helper()
	host.FreezeNode(a)
	l, _, _ := a.NodeLease()
	testenv.ExpireNodeLease(f.t, f.dsn, l.Node)
	rep, err := b.Recover(context.Background())
	require.NoError(f.t, err)
	return rep
}

// takeOverUncertain leaves c uncertain on node a (it crashes after the
// connector returned), lets a's lease run out, and has node b's recovery
// claim a's calls, which fences c's session. It returns b's report.
func (f *fleet) takeOverUncertain(a, b *host.Executor, c host.ToolCall) host.RecoveryReport {
	f.t.Helper()
	f.h.crashDuring(crash.AfterPluginReturn, func() { _, _ = a.Execute(context.Background(), c) })
	return f.takeOver(a, b)
}

// TestFleetPausedNodeWritesNothing: node a is paused in the middle of a
// call (the provider holds its request); its lease expires and node b
// takes the call over. When a resumes, the ledger refuses its write of the
// call's outcome; and a paused node that resumes with a new call (d) gets
// its dispatch record refused, so it never calls the connector.
func TestFleetPausedNodeWritesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual")
	a, b, d := f.start("a", nil), f.start("b", nil), f.start("d", nil)
	done := f.pauseMidCall(a, b, call("s1", "c1", `{"n":1}`))
	id := ledger.ExecutionID(ledger.DefaultNamespace, "s1", "c1")
	want := []string{"dispatch>dispatched#1@executor@a#1", "manual_policy>recovery_required#1@recovery@b#1"}
	require.Equal(t, want, trail(t, b, id))

	// a resumes: the request lands, a's outcome write is refused.
	f.h.prov.releaseHeld()
	got := <-done
	require.ErrorIs(t, got.err, host.ErrLeaseLost)
	require.Equal(t, 1, f.h.prov.count())
	require.Equal(t, want, trail(t, b, id), "nothing recorded by a after the takeover")
	rec, _, err := b.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StateRecoveryRequired, rec.State)
	require.ErrorIs(t, a.Health(), host.ErrLeaseLost, "a knows now")

	// d, paused past its lease and unaware of it, takes a new call: the
	// ledger refuses the dispatch record, so nothing is called.
	host.FreezeNode(d)
	testenv.ExpireNodeLease(t, f.dsn, "d")
	require.NoError(t, d.Health(), "d has not noticed")
	_, err = d.Execute(ctx, call("s2", "c2", `{"n":2}`))
	require.ErrorIs(t, err, host.ErrLeaseLost)
	_, _, err = b.Get(ctx, ledger.ExecutionID(ledger.DefaultNamespace, "s2", "c2"))
	require.ErrorIs(t, err, host.ErrNotFound)
	require.Equal(t, 1, f.h.prov.count())
}

// TestFleetLateWriteAnswersWhatTheLedgerHolds: node a is paused in the
// middle of a call; node b takes it over and an operator ends it. a
// resumes, registers a new lease, and its outcome write finds the call
// ended: a records nothing and answers the call as the ledger holds it,
// not with an error.
func TestFleetLateWriteAnswersWhatTheLedgerHolds(t *testing.T) {
	ctx := context.Background()
	// The attempt outlasts the takeover and the operator: no timeout cuts
	// it before the provider answers.
	f := newFleet(t, "manual", withTimeout("1m"))
	a, b := f.start("a", nil), f.start("b", nil)
	done := f.pauseMidCall(a, b, call("s1", "c1", `{"n":1}`))
	id := ledger.ExecutionID(ledger.DefaultNamespace, "s1", "c1")
	_, err := b.Resolve(ctx, id, host.Resolution{By: "oscar", Reason: "checked by hand: refund the customer"})
	require.NoError(t, err)
	want := trail(t, b, id)

	require.NoError(t, host.RegisterAgain(a)) // a new epoch, live again, before the write
	f.h.prov.releaseHeld()
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, host.StatusAbandoned, got.res.Status, "the call as the ledger holds it")
	require.Equal(t, want, trail(t, b, id), "nothing recorded by a")
}

// TestFleetApprovalAcrossNodes: a gated call's request is recorded by
// node a, approved through node b, and dispatched by node c when the
// runtime sends the call again there: the approval is consumed once.
func TestFleetApprovalAcrossNodes(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual", withApproval())
	a, b, c := f.start("a", nil), f.start("b", nil), f.start("c", nil)
	cl := call("s1", "c1", `{"n":1}`)
	res, err := a.Execute(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, host.StatusAwaitingApproval, res.Status)
	_, err = b.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
	require.NoError(t, err)
	res, err = c.Execute(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	res, err = a.Execute(ctx, cl)
	require.NoError(t, err)
	require.True(t, res.Recorded)
	require.Equal(t, 1, f.h.prov.count())
	require.Equal(t, []string{"intent>awaiting_approval#0@executor@a#1", "approved>approved#0@rita",
		"dispatch>dispatched#1@executor@c#1", "outcome>succeeded#1@executor@c#1"}, trail(t, a, res.ExecutionID))
	_, evs, err := a.Get(ctx, res.ExecutionID)
	require.NoError(t, err)
	require.Contains(t, evs[1].Evidence, "signed with rita's key")
	require.Contains(t, evs[2].Evidence, "signature verified")
}

// decidedFirst is a node's fleet ledger on which another node decides an
// approval between the node's read of it and its own decision's write.
type decidedFirst struct {
	*pgledger.DB
	mu    sync.Mutex
	other func() // run once, before the next decision's write
}

func (d *decidedFirst) ApplyOwned(ctx context.Context, l ledger.Lease, id string, t ledger.Transition) (ledger.Record, error) {
	d.mu.Lock()
	other := d.other
	if t.From == ledger.StateAwaitingApproval {
		d.other = nil
	}
	d.mu.Unlock()
	if other != nil && t.From == ledger.StateAwaitingApproval {
		other()
	}
	return d.DB.ApplyOwned(ctx, l, id, t)
}

// TestFleetApprovalDecidedThroughTwoNodes: a reviewer's decision through
// node a, while another decision through node b lands first, is answered
// as a decision on a call that is no longer awaiting approval
// (ErrNotAwaitingApproval, HTTP 409), not as an internal error, and
// changes nothing.
func TestFleetApprovalDecidedThroughTwoNodes(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual", withApproval())
	b := f.start("b", nil)
	race := &decidedFirst{}
	a := f.startOn("a", nil, map[string][]byte{"rita": host.ApprovalKey(ritaToken)}, func(db *pgledger.DB) ledger.Fleet {
		race.DB = db
		return race
	})
	for _, approve := range []bool{true, false} {
		cl := call("s1", fmt.Sprint("c-", approve), `{"n":1}`)
		res, err := a.Execute(ctx, cl)
		require.NoError(t, err)
		require.Equal(t, host.StatusAwaitingApproval, res.Status)
		d := host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest}
		race.mu.Lock()
		race.other = func() {
			_, err := b.Approve(ctx, res.Approval.ID, d)
			require.NoError(t, err)
		}
		race.mu.Unlock()
		decide := a.Approve
		if !approve {
			decide = a.Reject
		}
		got, err := decide(ctx, res.Approval.ID, d)
		require.ErrorIs(t, err, host.ErrNotAwaitingApproval)
		require.Equal(t, host.StatusPending, got.Status, "the first decision stands")
		require.Equal(t, ledger.StateApproved, got.State)
		require.Equal(t, []string{"intent>awaiting_approval#0@executor@a#1", "approved>approved#0@rita"}, trail(t, a, res.ExecutionID))
	}
}

// TestFleetLedgerOutageIsUnavailable: while the shared ledger's database
// is down, in the first lease TTL (the node's lease is still live by its
// own count), a call and a reviewer's decision fail with
// ledger.ErrUnavailable (503 unavailable over HTTP), not an internal
// error, and nothing is dispatched; once the database is back, the same
// call runs once.
func TestFleetLedgerOutageIsUnavailable(t *testing.T) {
	ctx := context.Background()
	// Durable: the test crashes the server, and without synchronous
	// commit the crash may take the node's just-committed migrations with
	// it.
	pg, err := testenv.StartPostgres(testenv.PostgresOptions{Durable: true})
	if err != nil {
		testenv.PostgresSkipOrFail(t, err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	f := newFleet(t, "idempotent-retry", withDedup())
	f.dsn, err = pg.CreateDatabase(ctx)
	require.NoError(t, err)
	a := f.start("a", nil)
	require.NoError(t, pg.Crash())

	_, err = a.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.ErrorIs(t, err, ledger.ErrUnavailable)
	_, err = a.Approve(ctx, ledger.ApprovalID(ledger.ExecutionID(ledger.DefaultNamespace, "s1", "c0")), host.Decision{By: "rita", ArgsDigest: "x"})
	require.ErrorIs(t, err, ledger.ErrUnavailable)
	require.NoError(t, a.Health(), "the lease is live by the node's own count: the outage is within its TTL")
	require.Equal(t, 0, f.h.prov.count())

	require.NoError(t, pg.Start())
	res, err := a.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 1, f.h.prov.count())
}

// TestFleetSameNodeIDTwice: a second live process started under a node
// id another live process holds supersedes it once (it cannot tell it from
// a crashed former incarnation), the older takes the id back at its next
// renewal, and the newer then gives way for good: it fails Health with
// ErrNodeInUse, closes Fatal (a server exits) and registers no more, so the
// two do not supersede each other forever. The older keeps serving.
func TestFleetSameNodeIDTwice(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "idempotent-retry", withDedup())
	older := f.start("a", nil)
	newer := f.start("a", nil)
	require.NoError(t, newer.Health())
	require.NoError(t, host.RenewNow(older), "the older registers again: the id was taken from it before its lease was due")
	require.NoError(t, older.Health())

	err := host.RenewNow(newer)
	require.ErrorIs(t, err, host.ErrNodeInUse)
	require.ErrorIs(t, newer.Health(), host.ErrNodeInUse)
	require.ErrorIs(t, newer.Health(), host.ErrLeaseLost, "the API answers it as a lost lease: 503")
	select {
	case <-newer.Fatal():
	default:
		t.Fatal("Fatal is not closed")
	}
	require.ErrorIs(t, host.RenewNow(newer), host.ErrNodeInUse, "it does not register again")
	_, err = newer.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.ErrorIs(t, err, host.ErrNodeInUse)

	l, live, _ := older.NodeLease()
	require.True(t, live)
	require.NoError(t, host.RenewNow(older))
	l2, live, _ := older.NodeLease()
	require.True(t, live)
	require.Equal(t, l.Epoch, l2.Epoch, "nobody superseded the older again")
	res, err := older.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	select {
	case <-older.Fatal():
		t.Fatal("the older gave way")
	default:
	}
}

// TestFleetRestartTakesOverAtOnce: a node that restarts under the same id
// gets a new epoch, which supersedes the old one at once: the restarted
// node recovers its former incarnation's calls without waiting for the
// lease to expire, and the former incarnation can write nothing more.
func TestFleetRestartTakesOverAtOnce(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "idempotent-retry", withDedup())
	old := f.start("a", nil)
	c := call("s1", "c1", `{"n":1}`)
	f.h.crashDuring(crash.AfterDispatchRecord, func() { _, _ = old.Execute(ctx, c) })
	host.FreezeNode(old)
	a := f.start("a", nil) // Open claims and recovers
	id := ledger.ExecutionID(ledger.DefaultNamespace, "s1", "c1")
	require.Equal(t, []string{"dispatch>dispatched#1@executor@a#1", "recover_retry>dispatched#2@recovery@a#2",
		"outcome>succeeded#2@executor@a#2"}, trail(t, a, id))
	require.Equal(t, 1, f.h.prov.count())
	_, err := old.Execute(ctx, call("s1", "c2", `{"n":2}`))
	require.ErrorIs(t, err, host.ErrLeaseLost)
	require.Equal(t, 1, f.h.prov.count())
}

// TestFleetLeaseLoss: a node that lost its lease takes no new work and
// fails its health check, until it has registered again under a new epoch.
func TestFleetLeaseLoss(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "idempotent-retry", withDedup())
	obs := newFleetEvents()
	a := f.start("a", obs)
	host.FreezeNode(a)
	require.NoError(t, a.Health())
	l, live, ok := a.NodeLease()
	require.True(t, ok && live)
	require.EqualValues(t, 1, l.Epoch)

	host.LoseLease(a)
	require.ErrorIs(t, a.Health(), host.ErrLeaseLost)
	_, err := a.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.ErrorIs(t, err, host.ErrLeaseLost)
	_, err = a.Recover(ctx)
	require.ErrorIs(t, err, host.ErrLeaseLost)
	_, live, _ = a.NodeLease()
	require.False(t, live)
	require.Zero(t, f.h.prov.count())

	require.NoError(t, host.RenewNow(a)) // registers again
	require.NoError(t, a.Health())
	l, live, _ = a.NodeLease()
	require.True(t, live)
	require.EqualValues(t, 2, l.Epoch)
	res, err := a.Execute(ctx, call("s1", "c1", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, []string{"dispatch>dispatched#1@executor@a#2", "outcome>succeeded#1@executor@a#2"}, trail(t, a, res.ExecutionID))

	// A renewal the ledger refuses (the lease expired meanwhile) loses
	// the lease and registers again at once.
	testenv.ExpireNodeLease(t, f.dsn, "a")
	require.NoError(t, host.RenewNow(a))
	l, live, _ = a.NodeLease()
	require.True(t, live)
	require.EqualValues(t, 3, l.Epoch)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Equal(t, 3, obs.registered)
	require.Equal(t, 2, obs.lost)
	require.Equal(t, 1, obs.renewalsFailed)
}

// TestFleetFencedSession: on a shared ledger the fence check of a new call
// is part of its insert (CreateOwnedUnfenced), not a read before it. A
// session fenced by one node's recovery refuses a new call at another
// node, naming the call that fences it, and records nothing of it; the
// recorded call is still answered; other sessions run; the resolution
// lifts the fence.
func TestFleetFencedSession(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual")
	a := f.start("a", nil)
	reads := &fenceReads{}
	b := f.startOn("b", nil, map[string][]byte{"rita": host.ApprovalKey(ritaToken)}, func(db *pgledger.DB) ledger.Fleet {
		reads.DB = db
		return reads
	})
	first, err := b.Execute(ctx, call("s0", "c1", `{"n":0}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, first.Status)
	require.Zero(t, reads.n.Load(), "a new call reads no fence before its insert")
	c1 := call("s1", "c1", `{"n":1}`)
	require.Equal(t, 1, f.takeOverUncertain(a, b, c1).Claimed)
	res, err := b.Execute(ctx, c1)
	require.NoError(t, err)
	require.Equal(t, host.StatusRecoveryRequired, res.Status, "the recorded call is answered in its fenced session")

	c2 := call("s1", "c2", `{"n":2}`)
	_, err = b.Execute(ctx, c2)
	var fe *host.FencedError
	require.ErrorAs(t, err, &fe)
	require.Len(t, fe.Calls, 1)
	require.Equal(t, "c1", fe.Calls[0].ToolCallID)
	require.Positive(t, reads.n.Load(), "the refusal reads which calls fence the session")
	_, _, err = b.Get(ctx, ledger.ExecutionID(ledger.DefaultNamespace, "s1", "c2"))
	require.ErrorIs(t, err, host.ErrNotFound, "the refused call left no record")
	require.Equal(t, 2, f.h.prov.count(), "nothing dispatched in the fenced session")

	other, err := b.Execute(ctx, call("s2", "c1", `{"n":3}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, other.Status, "another session is not fenced")

	_, err = b.Resolve(ctx, res.ExecutionID, host.Resolution{Applied: true, Receipt: "r-1", By: "oscar", Reason: "seen in the provider's dashboard"})
	require.NoError(t, err)
	res2, err := b.Execute(ctx, c2)
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res2.Status, "the fence is lifted")
	require.Equal(t, 4, f.h.prov.count())
}

// TestFleetFenceHoldsGatedCalls is TestFenceHoldsApprovedCalls on the
// fleet: a call of node a's session becomes recovery_required through node
// b's recovery, and on b the session's approved call (the resumed path) is
// not dispatched and a new gated call records no request, until the fence
// is lifted.
func TestFleetFenceHoldsGatedCalls(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual", withApproval())
	a, b := f.start("a", nil), f.start("b", nil)
	approve := func(c host.ToolCall) {
		t.Helper()
		res, err := a.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, host.StatusAwaitingApproval, res.Status)
		_, err = a.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
		require.NoError(t, err)
	}
	held, uncertain := call("s1", "held", `{"n":1}`), call("s1", "uncertain", `{"n":2}`)
	approve(held)
	approve(uncertain)
	f.takeOverUncertain(a, b, uncertain)
	require.Equal(t, 1, f.h.prov.count())

	_, err := b.Execute(ctx, held)
	var fe *host.FencedError
	require.ErrorAs(t, err, &fe, "the approved call is held")
	require.Len(t, fe.Calls, 1)
	require.Equal(t, "uncertain", fe.Calls[0].ToolCallID)
	heldID := ledger.ExecutionID(ledger.DefaultNamespace, "s1", "held")
	rec, _, err := b.Get(ctx, heldID)
	require.NoError(t, err)
	require.Equal(t, ledger.StateApproved, rec.State, "the held call keeps its approval")

	_, err = b.Execute(ctx, call("s1", "new", `{"n":3}`))
	require.ErrorAs(t, err, &fe, "a new gated call in the fenced session")
	_, _, err = b.Get(ctx, ledger.ExecutionID(ledger.DefaultNamespace, "s1", "new"))
	require.ErrorIs(t, err, host.ErrNotFound, "the refused gated call recorded no request")
	require.Equal(t, 1, f.h.prov.count(), "nothing dispatched in the fenced session")

	_, err = b.Resolve(ctx, ledger.ExecutionID(ledger.DefaultNamespace, "s1", "uncertain"),
		host.Resolution{Applied: true, Receipt: "r-1", By: "oscar", Reason: "seen at the provider"})
	require.NoError(t, err)
	res, err := b.Execute(ctx, held)
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status, "dispatched once the fence is lifted")
	res, err = b.Execute(ctx, call("s1", "new", `{"n":3}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusAwaitingApproval, res.Status, "a new gated call waits for its approval again")
	require.Equal(t, 2, f.h.prov.count())
}

// TestFleetFenceHoldsRepeats: in a session fenced through another node's
// recovery, a call that repeats the uncertain one's intent under a new id
// (held as a duplicate otherwise) and a guarded call of another intent are
// refused as fenced and record nothing; once the fence is lifted the
// repeat is held as a duplicate.
func TestFleetFenceHoldsRepeats(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual", withApplyField("duplicate_window", "10m"))
	a, b := f.start("a", nil), f.start("b", nil)
	uncertain := call("s1", "uncertain", `{"n":1}`)
	f.takeOverUncertain(a, b, uncertain)

	for _, c := range []host.ToolCall{call("s1", "repeat", `{"n":1}`), call("s1", "other", `{"n":2}`)} {
		_, err := b.Execute(ctx, c)
		var fe *host.FencedError
		require.ErrorAs(t, err, &fe, c.ToolCallID)
		require.Equal(t, "uncertain", fe.Calls[0].ToolCallID)
		_, _, err = b.Get(ctx, ledger.ExecutionID(ledger.DefaultNamespace, "s1", c.ToolCallID))
		require.ErrorIs(t, err, host.ErrNotFound, "the refused call %s recorded nothing", c.ToolCallID)
	}
	require.Equal(t, 1, f.h.prov.count())

	_, err := b.Resolve(ctx, ledger.ExecutionID(ledger.DefaultNamespace, "s1", "uncertain"),
		host.Resolution{Applied: true, Receipt: "r-1", By: "oscar", Reason: "seen at the provider"})
	require.NoError(t, err)
	res, err := b.Execute(ctx, call("s1", "repeat", `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusAwaitingApproval, res.Status, "the repeat is held once the fence is lifted")
	require.NotEmpty(t, res.DuplicateOf)
	require.Equal(t, 1, f.h.prov.count())
}

// fenceReads is a node's fleet ledger that counts its Fenced reads.
type fenceReads struct {
	*pgledger.DB
	n atomic.Int64
}

func (r *fenceReads) Fenced(ctx context.Context, namespace, sessionID string) ([]ledger.Record, error) {
	r.n.Add(1)
	return r.DB.Fenced(ctx, namespace, sessionID)
}

// fleetFenceLifter is a node's fleet ledger with a fenceLift on its reads.
type fleetFenceLifter struct {
	*pgledger.DB
	fenceLift
}

func (l *fleetFenceLifter) Fenced(ctx context.Context, namespace, sessionID string) ([]ledger.Record, error) {
	return l.read(ctx, namespace, sessionID, l.DB.Fenced)
}

// TestFleetFenceLiftedWhileRefusing is TestFenceLiftedWhileRefusing on the
// fleet, where the insert refuses the new call: the fence is lifted before
// the refusal reads which calls fence the session. The call is not refused
// with a fence that names no call; it runs, once.
func TestFleetFenceLiftedWhileRefusing(t *testing.T) {
	f := newFleet(t, "manual")
	a := f.start("a", nil)
	lifter := &fleetFenceLifter{}
	b := f.startOn("b", nil, nil, func(db *pgledger.DB) ledger.Fleet {
		lifter.DB = db
		return lifter
	})
	c1 := call("s1", "c1", `{"n":1}`)
	require.Equal(t, 1, f.takeOverUncertain(a, b, c1).Claimed)
	lifter.executeThroughLift(t, b, 0, ledger.ExecutionID(ledger.DefaultNamespace, "s1", "c1"), call("s1", "c2", `{"n":2}`))
	require.Equal(t, 2, f.h.prov.count(), "c1's one attempt, then c2's")
}
