package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// TestOf checks what the model is told of each status: whether the answer
// is final, whether the model may issue the call again (only when it never
// ran), and the guidance that keeps it from issuing a second call.
func TestOf(t *testing.T) {
	exp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		res          host.Result
		err          error
		status       string
		final, again bool
		text         []string
	}{
		{name: "succeeded", res: host.Result{ExecutionID: "ex_1", Status: host.StatusSucceeded, Receipt: "pi_1", Result: json.RawMessage(`{"a": 1}`)},
			status: "succeeded", final: true, text: []string{"Succeeded (execution ex_1, receipt pi_1).", `Result: {"a":1}`}},
		{name: "recorded", res: host.Result{ExecutionID: "ex_1", Status: host.StatusSucceeded, Recorded: true},
			status: "succeeded", final: true, text: []string{"recorded outcome of an earlier request, nothing was done again"}},
		{name: "awaiting approval", res: host.Result{ExecutionID: "ex_1", Status: host.StatusAwaitingApproval,
			Approval: &ledger.Approval{ID: "ap_1", ArgsDigest: "d1", ExpiresAt: exp}},
			status: "awaiting_approval", text: []string{"approval ap_1, arguments digest d1, expires 2026-01-02T03:04:05Z", "Do not issue this call again"}},
		{name: "pending", res: host.Result{ExecutionID: "ex_1", Status: host.StatusPending, Attempt: 2},
			status: "pending", text: []string{"Not finished yet (execution ex_1, attempt 2)", "Do not issue this call again"}},
		{name: "recovery required", res: host.Result{ExecutionID: "ex_1", Status: host.StatusRecoveryRequired, Error: "manual_policy: no outcome\nmore"},
			status: "recovery_required", text: []string{"an operator must resolve execution ex_1", "Do not issue it again. manual_policy: no outcome"}},
		{name: "rejected", res: host.Result{ExecutionID: "ex_1", Status: host.StatusRejected,
			Approval: &ledger.Approval{ID: "ap_1", By: "rita", Reason: "wrong card"}},
			status: "rejected", final: true, text: []string{"Not done: rejected (execution ex_1) by rita: wrong card.", "Do not issue it again"}},
		{name: "never reached connhost", res: host.Result{ExecutionID: "ex_1", Status: host.StatusCancelled,
			Error: host.NeverReceived},
			status: "cancelled", final: true, again: true, text: []string{"did not run", "If it is still wanted, issue it again."}},
		{name: "cancelled after a dispatch", res: host.Result{ExecutionID: "ex_1", Status: host.StatusCancelled, Attempt: 1, Error: "not applied"},
			status: "cancelled", final: true, text: []string{"Not done: cancelled (execution ex_1): not applied.", "Do not issue it again unless the user asks."}},
		{name: "expired", res: host.Result{ExecutionID: "ex_1", Status: host.StatusExpired},
			status: "expired", final: true, text: []string{"Not done: expired (execution ex_1).", "No reviewer decided in time."}},
		{name: "refused", err: fmt.Errorf("%w: session s1 is fenced", host.ErrSessionFenced),
			status: "refused", final: true, text: []string{"Refused: host: session fenced", "Nothing was done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Of(tc.res, tc.err)
			if a.Status != tc.status || a.Final != tc.final || a.MayIssueAgain != tc.again {
				t.Errorf("status %s final %t again %t; want %s %t %t", a.Status, a.Final, a.MayIssueAgain, tc.status, tc.final, tc.again)
			}
			for _, w := range tc.text {
				if !strings.Contains(a.Text, w) {
					t.Errorf("text %q lacks %q", a.Text, w)
				}
			}
			if f := a.Fields(); f["status"] != tc.status || f["message"] != a.Text {
				t.Errorf("fields %v do not carry the status and the text", f)
			}
			if !tc.again && strings.Contains(a.Text, "If it is still wanted") {
				t.Errorf("text %q invites the model to issue the call again", a.Text)
			}
		})
	}
}
