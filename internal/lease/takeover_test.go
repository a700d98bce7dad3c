package lease

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
)

// A request that read an execution before this node claimed it writes
// from an older version (the ledger refuses that write); the decision
// then taken on the claimed version must still carry the takeover note.
// Only a write since the claim retires it.
func TestTakeoverNoteSurvivesAStaleWrite(t *testing.T) {
	n := &Ledger{obs: nopObserver{}, log: slog.New(slog.DiscardHandler)}
	from := ledger.Lease{Node: "n3", Epoch: 1}
	n.noteClaims([]ledger.Claim{{Record: ledger.Record{ID: "ex", Events: 3}, From: from}})

	_, ok := n.takeoverOf(ledger.Record{ID: "ex", Events: 2})
	require.False(t, ok, "a write from before the claim carries no note")
	tk, ok := n.takeoverOf(ledger.Record{ID: "ex", Events: 3})
	require.True(t, ok, "the decision on the claimed version names the takeover")
	require.Equal(t, from, tk.from)

	_, ok = n.takeoverOf(ledger.Record{ID: "ex", Events: 4})
	require.False(t, ok, "a version written since the claim is no takeover")
	_, ok = n.takeoverOf(ledger.Record{ID: "ex", Events: 3})
	require.False(t, ok, "the note is retired once a newer version was seen")
}
