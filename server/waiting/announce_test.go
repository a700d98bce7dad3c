package waiting

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/ledgertest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// msgs returns the messages logged so far with their session_id.
func (s *syncBuffer) msgs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m["level"].(string)+" "+m["msg"].(string)+" "+toString(m["execution_id"])+toString(m["session_id"]))
		}
	}
	return out
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

// TestAnnouncer, on a real Pebble ledger: the startup summary names what
// waits; a transition into a waiting state reported to the Observer is
// announced once, with the session it fences; a call that stops waiting
// frees its session. Without the Observer's wake-up, the Poll finds it.
func TestAnnouncer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	led, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(t.TempDir(), "ledger")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	g := ledgertest.Dispatched("g1")
	g.State, g.Attempt = ledger.StateAwaitingApproval, 0
	g.Approval = &ledger.Approval{ID: "ap_g1", ArgsDigest: g.ArgsDigest, ExpiresAt: time.Now().Add(time.Hour), Decision: ledger.ApprovalPending}
	if _, err := led.Create(ctx, g, ledger.Event{}); err != nil {
		t.Fatal(err)
	}

	var logs syncBuffer
	a := NewAnnouncer(slog.New(slog.NewJSONHandler(&logs, nil)))
	a.Poll = time.Hour  // only the Observer wakes it
	var told syncBuffer // what OnWait was handed, one line each
	a.OnWait = func(w Wait) {
		switch {
		case w.Session != nil:
			fmt.Fprintf(&told, "fenced %s %s %v\n", w.Session.SessionID, w.Session.Calls, w.Since.IsZero())
		default:
			fmt.Fprintf(&told, "%s %s %s %v\n", w.Call.State, w.Call.ID, w.Why, w.Since.IsZero())
		}
	}
	obs := a.Observer(nil)
	a.Start(ctx, led)
	if got := logs.msgs(); len(got) != 2 || got[0] != "INFO waiting for a human " || got[1] != "INFO call awaits approval g1s1" {
		t.Fatalf("startup: %q", got)
	}

	r := ledgertest.Dispatched("r1")
	r.State, r.SessionID = ledger.StateRecoveryRequired, "s2"
	if _, err := led.Create(ctx, r, ledger.Event{Decision: "recovery_required", Evidence: "no reconcile"}); err != nil {
		t.Fatal(err)
	}
	obs.Transition(ledger.StateRecoveryRequired, "recovery_required")
	waitFor(t, &logs, "WARN session fenced: its new calls are refused until an operator resolves its recovery_required calls s2")
	if _, err := led.Apply(ctx, "r1", ledger.Transition{From: ledger.StateRecoveryRequired, FromAttempt: 1, To: ledger.StateAbandoned, Attempt: 1,
		Resolution: &ledger.Resolution{By: "olga", Reason: "no trace", At: time.Now()}, Event: ledger.Event{Decision: "operator_abandon"}}); err != nil {
		t.Fatal(err)
	}
	obs.Transition(ledger.StateAwaitingApproval, "intent") // any wake-up
	waitFor(t, &logs, "INFO session no longer fenced: it takes new calls again s2")
	got := logs.msgs()
	want := []string{"INFO waiting for a human ", "INFO call awaits approval g1s1",
		"WARN call needs an operator: recovery_required r1s2",
		"WARN session fenced: its new calls are refused until an operator resolves its recovery_required calls s2",
		"INFO session no longer fenced: it takes new calls again s2"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// OnWait is told what starts to wait, not what the startup summary
	// found waiting already.
	told.mu.Lock()
	defer told.mu.Unlock()
	if got, want := told.b.String(), "recovery_required r1 recovery_required: no reconcile false\nfenced s2 [r1] false\n"; got != want {
		t.Fatalf("OnWait got:\n%swant:\n%s", got, want)
	}
}

func waitFor(t *testing.T, logs *syncBuffer, msg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range logs.msgs() {
			if m == msg {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %q in:\n%s", msg, strings.Join(logs.msgs(), "\n"))
}
