package fault

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDurationJSON(t *testing.T) {
	var r Rule
	if err := json.Unmarshal([]byte(`{"kind":"hang","delay":"1.5s"}`), &r); err != nil || time.Duration(r.Delay) != 1500*time.Millisecond {
		t.Fatalf("%+v %v", r, err)
	}
	if err := json.Unmarshal([]byte(`{"kind":"hang","delay":2000}`), &r); err != nil || r.Delay != 2000 {
		t.Fatalf("%+v %v", r, err)
	}
	if err := json.Unmarshal([]byte(`{"kind":"hang","delay":"soon"}`), &r); err == nil {
		t.Fatal("bad duration accepted")
	}
	b, _ := json.Marshal(Rule{Kind: Hang, Delay: Duration(time.Second)})
	if !strings.Contains(string(b), `"delay":"1s"`) {
		t.Fatalf("%s", b)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := Rule{Kind: "x", Status: 1000, Delay: -1, Size: -1, Path: "/_sandbox/faults"}.Validate()
	for _, want := range []string{"unknown kind", "status 1000", "delay", "size", "control API"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

func TestTakeOrderAndCounts(t *testing.T) {
	in := New()
	for _, r := range []Rule{
		{Kind: Status, Status: 500, Path: "/v1/refunds"},
		{Kind: Status, Status: 503, Count: 2},
		{Kind: Drop, Method: "GET"},
	} {
		if err := in.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		method, path string
		want         int // status of the rule hit, 0 for Drop, -1 for none
	}{
		{"POST", "/_sandbox/stats", -1}, // never the control API
		{"POST", "/v1/refunds", 500},
		{"POST", "/v1/refunds", 503},
		{"GET", "/v1/refunds", 503},
		{"GET", "/v1/refunds", 0},
		{"GET", "/v1/refunds", -1},
	}
	for i, s := range steps {
		r, ok := in.Take(s.method, s.path)
		got := -1
		if ok {
			got = r.Status
		}
		if got != s.want {
			t.Fatalf("step %d %s %s: got %d, want %d", i, s.method, s.path, got, s.want)
		}
	}
	if in.Injected() != 4 || len(in.Rules()) != 0 {
		t.Fatalf("injected %d rules %v", in.Injected(), in.Rules())
	}
}

func TestHoldCheckpoint(t *testing.T) {
	in := New()
	ctx := WithRule(context.Background(), Rule{Kind: Hold})
	done := make(chan bool)
	go func() { done <- in.Checkpoint(ctx) }()
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.WaitHeld(wctx, 1); err != nil {
		t.Fatal(err)
	}
	in.Release()
	if fail := <-done; fail {
		t.Fatal("hold asked to fail")
	}
	if in.Held() != 0 {
		t.Fatalf("held %d", in.Held())
	}
	if !in.Checkpoint(WithRule(context.Background(), Rule{Kind: ExecError})) {
		t.Fatal("exec_error did not fail")
	}
	if in.Checkpoint(context.Background()) {
		t.Fatal("no rule failed")
	}
	in.Close()
	if in.Checkpoint(ctx) { // does not block after Close
		t.Fatal("hold after close failed")
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := in.WaitHeld(cctx, 5); err == nil {
		t.Fatal("WaitHeld ignored its context")
	}
}
