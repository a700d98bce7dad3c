package pgledger

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Retryable SQLSTATEs: the transaction was aborted by the database and can
// be run again from its start. PostgreSQL reports serialization_failure
// (40001) only at REPEATABLE READ or SERIALIZABLE, which this package does
// not use, but CockroachDB runs every transaction SERIALIZABLE and reports
// it whenever it must reorder; deadlock_detected (40P01) can happen on
// either when two statements lock rows in different orders.
var retryCodes = []string{"40001", "40P01"}

// maxRetries bounds the retries of one operation; each retry waits a
// jittered, doubling pause from 1 ms to 100 ms.
const maxRetries = 20

// retry runs fn until it succeeds, fails with an error that is not
// retryable (retryCodes, or the extra codes), or has failed maxRetries+1
// times. fn must redo the whole transaction, reads included: what it read
// before may have changed.
func (d *DB) retry(ctx context.Context, fn func() error, extra ...string) error {
	pause := time.Millisecond
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || attempt == maxRetries || !retryable(err, extra) {
			return err
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(pause))) + pause/2)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

func retryable(err error, extra []string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return slices.Contains(retryCodes, pgErr.Code) || slices.Contains(extra, pgErr.Code)
}

// unreachable reports whether err says the database could not be reached
// or went away (a refused or broken connection, a server shutting down or
// starting, a timeout on the network): nothing the ledger can decide on,
// for as long as the outage lasts.
func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: the server is
		// shutting down, crashed or is not accepting connections yet.
		return strings.HasPrefix(pgErr.Code, "08") || slices.Contains([]string{"57P01", "57P02", "57P03"}, pgErr.Code)
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}
