package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
)

// consoleSessions returns l's console sessions; every backend keeps them.
func consoleSessions(t *testing.T, l ledger.Ledger) ledger.ConsoleSessions {
	t.Helper()
	cs, ok := l.(ledger.ConsoleSessions)
	if !ok {
		t.Fatalf("%T does not keep console sessions (ledger.ConsoleSessions)", l)
	}
	return cs
}

// ConsoleSessions: a console session reads back as written, under the
// hash of its id; a second sign-in under the same key is ErrExists and
// changes nothing; a revocation keeps its first time, survives a crash
// and reopening, and is ErrNotFound for an unknown key; "sign out
// everywhere" revokes the principal's live sessions only (not another
// principal's, not an expired one, and counts none twice); concurrent
// revocations of one principal revoke each session once; Prune deletes
// the sessions that expired before its cutoff and keeps the others.
func ConsoleSessions(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := NewClock()
	st, l := open(t, b, clock.Now)
	cs := consoleSessions(t, l)
	now := clock.Now()
	sess := func(id, principal string, ttl time.Duration) ledger.ConsoleSession {
		return ledger.ConsoleSession{Key: ledger.ConsoleSessionKey(id), Principal: principal, Created: now, Expires: now.Add(ttl)}
	}
	a1, a2, gone, b1 := sess("a1", "rita", time.Hour), sess("a2", "rita", 2*time.Hour), sess("gone", "rita", time.Minute), sess("b1", "olga", time.Hour)
	for _, s := range []ledger.ConsoleSession{a1, a2, gone, b1} {
		require.NoError(t, cs.AddConsoleSession(ctx, s))
	}
	other := a1
	other.Principal = "olga"
	require.ErrorIs(t, cs.AddConsoleSession(ctx, other), ledger.ErrExists)
	got, err := cs.ConsoleSession(ctx, a1.Key)
	require.NoError(t, err)
	require.Equal(t, a1, got, "a session reads back as written (and a second sign-in under its key changed nothing)")
	require.True(t, got.Live(now))
	_, err = cs.ConsoleSession(ctx, ledger.ConsoleSessionKey("never"))
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.ErrorIs(t, cs.RevokeConsoleSession(ctx, ledger.ConsoleSessionKey("never"), now), ledger.ErrNotFound)
	require.NotEqual(t, ledger.ConsoleSessionKey("a1"), ledger.ConsoleSessionKey("a2"))

	clock.Advance(time.Second)
	first := clock.Now()
	require.NoError(t, cs.RevokeConsoleSession(ctx, a1.Key, first))
	require.NoError(t, cs.RevokeConsoleSession(ctx, a1.Key, first.Add(time.Minute)))
	got, err = cs.ConsoleSession(ctx, a1.Key)
	require.NoError(t, err)
	require.True(t, got.Revoked.Equal(first), "a revoked session keeps its first revocation: %v", got.Revoked)
	require.False(t, got.Live(first))

	// What was acknowledged survives a crash.
	st.Crash(t, l)
	l = st.Open(t, clock.Now)
	t.Cleanup(func() { _ = l.Close() })
	cs = consoleSessions(t, l)
	got, err = cs.ConsoleSession(ctx, a1.Key)
	require.NoError(t, err)
	require.True(t, got.Revoked.Equal(first), "after a crash: %+v", got)

	// Sign out everywhere, once the minute-long session has expired.
	clock.Advance(2 * time.Minute)
	at := clock.Now()
	n, err := cs.RevokeConsoleSessions(ctx, "rita", at)
	require.NoError(t, err)
	require.Equal(t, 1, n, "rita's one live session (a2) is revoked; a1 was before, gone has expired")
	for _, tc := range []struct {
		s       ledger.ConsoleSession
		revoked time.Time
	}{{a1, first}, {a2, at}, {gone, time.Time{}}, {b1, time.Time{}}} {
		got, err := cs.ConsoleSession(ctx, tc.s.Key)
		require.NoError(t, err)
		require.True(t, got.Revoked.Equal(tc.revoked), "%s's session expiring %v: revoked %v, want %v", got.Principal, got.Expires, got.Revoked, tc.revoked)
	}
	n, err = cs.RevokeConsoleSessions(ctx, "rita", at)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to revoke")

	// Concurrent sign-outs everywhere revoke each session once.
	const many = 20
	for i := range many {
		require.NoError(t, cs.AddConsoleSession(ctx, sess(fmt.Sprint("m", i), "max", time.Hour)))
	}
	var wg sync.WaitGroup
	counts := make([]int, 4)
	errs := make([]error, 4)
	for w := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[w], errs[w] = cs.RevokeConsoleSessions(ctx, "max", at)
		}()
	}
	wg.Wait()
	total := 0
	for w := range counts {
		require.NoError(t, errs[w])
		total += counts[w]
	}
	require.Equal(t, many, total, "concurrent revocations: %v", counts)

	// Prune deletes what expired before the cutoff (gone, a1) and keeps
	// the rest (a2 expires later).
	_, err = l.Prune(ctx, now.Add(90*time.Minute))
	require.NoError(t, err)
	for _, tc := range []struct {
		s    ledger.ConsoleSession
		kept bool
	}{{a1, false}, {gone, false}, {b1, false}, {a2, true}, {sess("m0", "max", time.Hour), false}} {
		_, err := cs.ConsoleSession(ctx, tc.s.Key)
		if tc.kept {
			require.NoError(t, err, "a session expiring after the cutoff is kept")
		} else if !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a session that expired at %v, before the cutoff: %v, want ErrNotFound", tc.s.Expires, err)
		}
	}
	if b.Check != nil {
		b.Check(t, l)
	}
}
