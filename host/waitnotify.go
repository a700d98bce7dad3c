package host

import "context"

type waitNotifyKey struct{}

// WithWaitNotify returns a context under which Execute calls f each time
// it is about to wait inline for its execution (a retry scheduled after a
// retryable failure, or an attempt that has to settle before it is
// reconciled), with the Result a caller would see now: status pending,
// the attempt that ended and NextAttemptAt. A runtime that keeps a client
// waiting uses it to report progress. f runs on Execute's goroutine and
// must not block; it is not called for waits Execute leaves to a later
// call (those end the call with status pending).
func WithWaitNotify(ctx context.Context, f func(Result)) context.Context {
	return context.WithValue(ctx, waitNotifyKey{}, f)
}

func waitNotifyOf(ctx context.Context) func(Result) {
	if ctx == nil {
		return nil
	}
	f, _ := ctx.Value(waitNotifyKey{}).(func(Result))
	return f
}
