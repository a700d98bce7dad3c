package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// TestOpenRefusesLostLedger: an executor whose ledger directory was
// deleted while it was stopped does not start on an empty ledger (where
// the call it already made would run again); it fails with a
// *ledger.DamageError before loading anything, and only LedgerCreate =
// CreateInit starts a new ledger, keeping the old remains aside.
func TestOpenRefusesLostLedger(t *testing.T) {
	h := newHarness(t, "manual")
	c := call("s1", "c1", `{"n":1}`)
	require.Equal(t, host.StatusSucceeded, h.exec(c).Status)
	require.Equal(t, 1, h.prov.count())
	require.NoError(t, h.ex.Close(context.Background()))
	h.ex = nil

	dir := filepath.Join(h.dir, "ledger")
	require.NoError(t, os.RemoveAll(dir))
	_, err := host.Open(context.Background(), h.options())
	var de *ledger.DamageError
	require.ErrorAs(t, err, &de)
	require.Equal(t, ledger.DamageMissing, de.Kind)
	require.ErrorIs(t, err, ledger.ErrCorrupt)
	require.Contains(t, err.Error(), dir+" is missing")
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "no new ledger was created in its place")
	require.Equal(t, 1, h.prov.count(), "nothing dispatched")

	o := h.options()
	o.LedgerCreate = ledger.CreateInit
	ex, err := host.Open(context.Background(), o)
	require.NoError(t, err)
	h.ex = ex
	aside, err := filepath.Glob(dir + ".mark.aside-*")
	require.NoError(t, err)
	require.Len(t, aside, 1, "the old mark is kept aside")
}

// partialFleet is a shared ledger written against an older ledger.Fleet:
// it registers node leases but lacks the methods added since.
type partialFleet struct{ ledger.Ledger }

func (partialFleet) RegisterNode(context.Context, string, time.Duration) (ledger.Lease, error) {
	return ledger.Lease{}, nil
}

// TestOpenRefusesPartialFleet: fleet mode is chosen by the ledger's type,
// so a shared ledger that misses a method of ledger.Fleet is refused
// rather than run as a single-node ledger (no leases, no owned writes).
func TestOpenRefusesPartialFleet(t *testing.T) {
	ctx := context.Background()
	led, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(t.TempDir(), "ledger")})
	require.NoError(t, err)
	defer led.Close()
	h := newHarness(t, "manual")
	o := h.options()
	o.DataDir, o.Ledger, o.Node = "", partialFleet{led}, "a"
	_, err = host.Open(ctx, o)
	require.ErrorContains(t, err, "host_test.partialFleet registers node leases but does not implement all of ledger.Fleet")
}
