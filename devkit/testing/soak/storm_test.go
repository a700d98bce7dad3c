//go:build unix

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
)

// killer SIGKILLs the host at random moments and restarts it on the same
// data directory, until ctx is done or the kill budget is spent.
func (s *soak) killer(ctx context.Context, rng *rand.Rand) error {
	// Leave room for the restarts, so that the whole budget of kills
	// usually fits in the storm.
	mean := *durationFlag / time.Duration(max(*killsFlag, 1)+2)
	for range *killsFlag {
		wait := time.Duration(float64(mean) * (0.2 + 1.6*rng.Float64()))
		tm := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			tm.Stop()
			return nil
		case <-tm.C:
		}
		// About one kill in three lands while a provider holds a call's
		// request, received and not yet processed, and the request stays
		// held for longer than the host's whole retry budget before it
		// lands: a runtime must never be told "failed" for it.
		if *holdFlag > 0 && rng.IntN(3) == 0 {
			s.holdInFlight(ctx, rng)
		}
		if s.host.kill() {
			return fmt.Errorf("connhost dev exited on its own; log tail:\n%s", s.host.logTail())
		}
		s.kills.Add(1)
		if err := s.host.start(); err != nil {
			return fmt.Errorf("restart after kill %d: %w", s.kills.Load(), err)
		}
		s.restarts.Add(1)
	}
	return nil
}

// holdInFlight makes one effectful provider endpoint hold its next request
// and waits (briefly) until one is held; the request is released, and
// takes effect, holdFlag later.
func (s *soak) holdInFlight(ctx context.Context, rng *rand.Rand) {
	eps := []struct {
		payments bool
		path     string
	}{{true, "/v1/payment_intents"}, {true, "/v1/refunds"}, {false, "/api/v1/send"}, {false, "/api/v1/message/"}}
	ep := eps[rng.IntN(len(eps))]
	rule := fault.Rule{Kind: fault.Hold, Method: "POST", Path: ep.path}
	add := s.prov.AddEmailFault
	if ep.payments {
		add = s.prov.AddPaymentsFault
	}
	// Rules are tried in order: the hold goes before the latency rules,
	// which match every request.
	if err := s.prov.ClearFaults(ctx); err != nil {
		s.errorf("clear faults: %v", err)
		return
	}
	if err := add(ctx, rule); err != nil {
		s.errorf("arm a hold on %s: %v", ep.path, err)
		return
	}
	s.addLatency(ctx, rng)
	time.AfterFunc(*holdFlag, func() { _ = s.prov.ReleaseHeld(context.WithoutCancel(ctx)) })
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := s.prov.Held(ctx); err == nil && n > 0 {
			s.inFlightKills.Add(1)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addLatency makes every effectful provider endpoint answer late, after
// the effect is applied (fault.Hang with Apply): a kill then often lands in
// the window that matters most, where the provider applied the call and the
// ledger has not heard of it. Without it a SIGKILL at a random moment
// almost always hits the host between calls.
func (s *soak) addLatency(ctx context.Context, rng *rand.Rand) {
	if *latencyFlag <= 0 {
		return
	}
	for _, r := range []struct {
		payments     bool
		method, path string
	}{
		{true, "POST", "/v1/payment_intents"},
		{true, "POST", "/v1/refunds"},
		{false, "POST", "/api/v1/send"},
		{false, "POST", "/api/v1/message/"}, // release
	} {
		d := time.Duration(float64(*latencyFlag) * (0.5 + rng.Float64()))
		rule := fault.Rule{Kind: fault.Hang, Method: r.method, Path: r.path, Count: -1, Apply: true, Delay: fault.Duration(d)}
		add := s.prov.AddEmailFault
		if r.payments {
			add = s.prov.AddPaymentsFault
		}
		if err := add(ctx, rule); err != nil {
			s.fatalf("provider latency on %s %s: %v", r.method, r.path, err)
		}
	}
}

// worker issues new calls, like one agent runtime, until the storm ends,
// then finishes the call it holds (under ctx).
func (s *soak) worker(ctx, storm context.Context, w int, rng *rand.Rand) {
	for n := 0; ; n++ {
		// A model's turn between calls.
		tm := time.NewTimer(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		select {
		case <-storm.Done():
			tm.Stop()
			return
		case <-tm.C:
		}
		if s.issued.Add(1) > int64(*callsFlag) {
			s.issued.Add(-1)
			return
		}
		c := s.newCall(w, n, rng)
		if c == nil {
			s.issued.Add(-1)
			return // every session is fenced
		}
		s.drive(ctx, c, true)
	}
}

// newCall picks a session that is not known to be fenced, an operation and
// its arguments, and registers the call.
func (s *soak) newCall(w, n int, rng *rand.Rand) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var open []string
	for i := range sessions {
		if id := fmt.Sprintf("soak-s%d", i); !s.fenced[id] {
			open = append(open, id)
		}
	}
	if len(open) == 0 {
		return nil
	}
	c := &call{session: open[rng.IntN(len(open))], toolCallID: fmt.Sprintf("w%d-c%d", w, n)}
	var args any
	switch r := rng.IntN(100); {
	case r < 15 && len(s.payments) > 0:
		i := rng.IntN(len(s.payments))
		pi := s.payments[i]
		s.payments = slices.Delete(s.payments, i, i+1) // one refund per payment
		c.tool = opRefund
		args = map[string]any{"payment_intent": pi, "amount": 100 + rng.IntN(400), "reason": "requested_by_customer"}
	case r < 25 && len(s.messages) > 0:
		c.tool = opRelease
		// The emulator relays a released message to itself: the copy's
		// recipient names the call that released it.
		args = map[string]any{"id": s.messages[rng.IntN(len(s.messages))], "to": releaseTo(c.toolCallID)}
	case r < 65:
		c.tool = opCreate
		args = map[string]any{"amount": 1000 + rng.IntN(9000), "currency": "usd", "payment_method": "pm_card_visa",
			"description": fmt.Sprintf("soak %s", c.toolCallID)}
	default:
		c.tool = opSend
		args = map[string]any{"to": fmt.Sprintf("soak-%d@example.com", w), "subject": "soak " + c.toolCallID,
			"text": fmt.Sprintf("kill-storm soak, seed %d, call %s", s.seed, c.toolCallID)}
	}
	c.args, _ = json.Marshal(args)
	s.calls = append(s.calls, c)
	v, _ := s.perTool.LoadOrStore(c.tool, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	return c
}
