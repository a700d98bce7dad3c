package mcpserver

import (
	"strings"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// Next is what a model may do after a tools/call result (Result.Next).
// None of them asks for the call under a new tool-call id: a new id is a
// new execution, which could act a second time.
type Next string

const (
	// NextDone: the call is finished and succeeded (or this is the
	// recorded outcome of an earlier request); use its result.
	NextDone Next = "done"
	// NextWaitForHuman: nothing more happens until a person acts (a
	// reviewer approves or rejects it, an operator resolves an uncertain
	// call); tell the user, do not issue the call again.
	NextWaitForHuman Next = "wait_for_human"
	// NextRetrySameIDs: not finished yet, or not taken yet (still
	// pending, rate limited, connhost starting); the same call, with the
	// same arguments and ids, sent again later continues it or returns
	// its outcome, and never runs it twice.
	NextRetrySameIDs Next = "retry_same_ids"
	// NextDoNotRetry: final and not done (failed, rejected, expired,
	// cancelled, refused); issuing it again would fail the same way or
	// act anew: tell the user instead.
	NextDoNotRetry Next = "do_not_retry"
	// NextMayIssueAgain: the call never ran: it never reached connhost
	// before the runtime settled it on resume (host.NeverReceived), and
	// these ids will not run it. If the user still wants it, the model may
	// issue it as a new call.
	NextMayIssueAgain Next = "may_issue_again"
)

// nextAfter is what a model may do after an execution answered res.
func nextAfter(res host.Result) Next {
	if res.Status == host.StatusCancelled && res.Error == host.NeverReceived {
		return NextMayIssueAgain
	}
	switch res.Status {
	case host.StatusSucceeded:
		return NextDone
	case host.StatusAwaitingApproval, host.StatusRecoveryRequired:
		return NextWaitForHuman
	case host.StatusPending:
		return NextRetrySameIDs
	}
	return NextDoNotRetry // failed, rejected, expired, cancelled, abandoned
}

// nextAfterRefusal is what a model may do after a call was refused with
// code (nothing was recorded or dispatched for it).
func nextAfterRefusal(code httpapi.Code) Next {
	switch code {
	case httpapi.CodeRateLimited, httpapi.CodeUnavailable, httpapi.CodeInternal, httpapi.CodeConnectorBusy, CodeStarting:
		return NextRetrySameIDs
	case httpapi.CodeSessionFenced, httpapi.CodeRecoveryRequired, httpapi.CodePendingApprovalsLimit, httpapi.CodeLedgerDamaged:
		return NextWaitForHuman
	}
	return NextDoNotRetry
}

// guide sets r's Next and its one-line Message: text without omit (a
// succeeded call's result, which the structured content holds whole).
func guide(r *Result, next Next, text, omit string) {
	r.Next = next
	if omit != "" {
		text = strings.Replace(text, omit, "", 1)
	}
	r.Message = strings.Join(strings.Fields(text), " ")
}
