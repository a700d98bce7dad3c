package httpapi

import (
	"errors"
	"fmt"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

type problemOfCase struct {
	err  error
	res  host.Result
	want Code
}

func problemOfCases() []problemOfCase {
	wrap := func(err error) error { return fmt.Errorf("ctx: %w", err) }
	return []problemOfCase{
		{wrap(host.ErrBadCall), host.Result{}, CodeBadRequest},
		{&host.ArgumentsError{Tool: "x.y", Err: errors.New("bad")}, host.Result{}, CodeInvalidArguments},
		{wrap(host.ErrUnknownTool), host.Result{}, CodeUnknownTool},
		{&host.IntentMismatchError{RecordedDigest: "a", GivenDigest: "b"}, host.Result{}, CodeIntentMismatch},
		{&host.FencedError{}, host.Result{}, CodeSessionFenced},
		{wrap(host.ErrNotFound), host.Result{}, CodeNotFound},
		{wrap(host.ErrApprovalDigest), host.Result{ExecutionID: "ex_1"}, CodeApprovalDigestMismatch},
		{wrap(host.ErrApprovalExpired), host.Result{}, CodeApprovalExpired},
		{wrap(host.ErrNotAwaitingApproval), host.Result{}, CodeNotAwaitingApproval},
		{wrap(host.ErrNotRecoveryRequired), host.Result{}, CodeNotRecoveryRequired},
		{wrap(host.ErrRecoveryRequired), host.Result{ExecutionID: "ex_1"}, CodeRecoveryRequired},
		{wrap(host.ErrApprovalRequired), host.Result{ExecutionID: "ex_1"}, CodeApprovalRequired},
		{&host.UnknownToolError{Tool: "x.y", Available: []string{"a.b"}}, host.Result{}, CodeUnknownTool},
		{wrap(host.ErrPruned), host.Result{}, CodePruned},
		{host.ErrClosed, host.Result{}, CodeUnavailable},
		{wrap(host.ErrLeaseLost), host.Result{}, CodeUnavailable},
		{wrap(ledger.ErrUnavailable), host.Result{}, CodeUnavailable},
		{wrap(host.ErrNamespaceForbidden), host.Result{}, CodeNamespaceForbidden},
		{&host.RateLimitedError{Principal: "a", PerSecond: 1, RetryAfter: time.Second}, host.Result{}, CodeRateLimited},
		{wrap(host.ErrPendingApprovalsLimit), host.Result{}, CodePendingApprovalsLimit},
		{wrap(host.ErrArgumentsTooLarge), host.Result{}, CodeArgumentsTooLarge},
		{errors.New("disk on fire"), host.Result{}, CodeInternal},
	}
}
