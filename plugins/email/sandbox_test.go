package main

import (
	"net/http/httptest"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest/guesttest"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/mailpit"
)

// These tests run the connector against the Mailpit emulator the host's dev
// mode and end-to-end tests use (devkit/sandbox/mailpit), so the two agree
// on the wire format and on Mailpit's search semantics.

func startSandbox(t *testing.T) (*mailpit.Server, *testHost) {
	t.Helper()
	s := mailpit.New(mailpit.Options{})
	srv := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); srv.Close() })
	return s, newTestHost(srv.URL, map[string]string{"base_url": srv.URL, "default_from": "", "basic_auth": ""})
}

func TestSandboxSendReconcile(t *testing.T) {
	s, h := startSandbox(t)
	// A look-alike first: its Message-ID contains ours.
	wantKind(t, sendOp(h, "x"+key1, sendJSON), abi.OutcomeOK, "")
	wantKind(t, reconcileOp(h, key1), abi.OutcomeNotApplied, "")
	o := sendOp(h, key1, sendJSON)
	wantKind(t, o, abi.OutcomeOK, "")
	rec := reconcileOp(h, key1)
	wantKind(t, rec, abi.OutcomeApplied, "")
	if rec.Receipt != o.Receipt {
		t.Fatalf("receipt %q, want %q", rec.Receipt, o.Receipt)
	}
	again := sendOp(h, key1, sendJSON)
	if r := guesttest.Result[sendResult](t, again); !r.AlreadySent || again.Receipt != o.Receipt {
		t.Fatalf("second send %+v", r)
	}
	if n := len(s.Messages()); n != 2 {
		t.Fatalf("%d messages, want 2", n)
	}
	g := invoke(h, abi.ExportExecute, "get_message", "", `{"id":"`+o.Receipt+`"}`)
	wantKind(t, g, abi.OutcomeOK, "")
	if v := guesttest.Result[messageView](t, g); v.MessageID != messageID(key1) {
		t.Fatalf("message %+v", v)
	}
	wantKind(t, invoke(h, abi.ExportExecute, "search_messages", "", `{"query":"tag:`+keyTag(key1)+`"}`), abi.OutcomeOK, "")
}

// TestSandboxLostAnswers: whatever happens to the send's answer, the
// message is sent at most once and a stored message is reported as sent.
func TestSandboxLostAnswers(t *testing.T) {
	for _, tt := range []struct {
		rule fault.Rule
		want abi.OutcomeKind
		msgs int
	}{
		{fault.Rule{Kind: fault.Drop, Method: "POST", Path: "/api/v1/send", Apply: true}, abi.OutcomeOK, 1},
		{fault.Rule{Kind: fault.Truncated, Method: "POST", Path: "/api/v1/send", Apply: true}, abi.OutcomeOK, 1},
		{fault.Rule{Kind: fault.HTML, Method: "POST", Path: "/api/v1/send", Apply: true}, abi.OutcomeOK, 1},
		// Sent and not stored (yet): uncertain, never "retryable".
		{fault.Rule{Kind: fault.Drop, Method: "POST", Path: "/api/v1/send"}, abi.OutcomeUncertain, 0},
		{fault.Rule{Kind: fault.Status, Status: 503, Method: "POST", Path: "/api/v1/send"}, abi.OutcomeUncertain, 0},
		{fault.Rule{Kind: fault.ExecError, Method: "POST", Path: "/api/v1/send"}, abi.OutcomeUncertain, 0},
		{fault.Rule{Kind: fault.Status, Status: 503, Method: "GET", Path: "/api/v1/search"}, abi.OutcomeRetryable, 0},
	} {
		name := string(tt.rule.Kind) + " " + tt.rule.Method
		if tt.rule.Apply {
			name += " applied"
		}
		t.Run(name, func(t *testing.T) {
			s, h := startSandbox(t)
			if err := s.Faults().Add(tt.rule); err != nil {
				t.Fatal(err)
			}
			wantKind(t, sendOp(h, key1, sendJSON), tt.want, "")
			if n := len(s.Messages()); n != tt.msgs {
				t.Fatalf("%d messages, want %d", n, tt.msgs)
			}
			// The next attempt never duplicates.
			wantKind(t, sendOp(h, key1, sendJSON), abi.OutcomeOK, "")
			if n := len(s.Messages()); n != 1 {
				t.Fatalf("%d messages after the next attempt, want 1", n)
			}
		})
	}
}
