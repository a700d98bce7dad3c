package host_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// BenchmarkIdlePass measures one recovery pass of a server that holds
// 20,000 executions awaiting approval and nothing due: the pass Run makes
// every second (pass=due, the due index) against a pass over every
// pending execution (pass=every, Recover, what Run did before the due
// index). ns/op is the CPU an idle server spends per second on its pass.
func BenchmarkIdlePass(b *testing.B) {
	const pending = 20_000
	ctx := context.Background()
	dir := b.TempDir()
	db, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(dir, "ledger")})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	recs := make([]ledger.Record, 0, pending)
	for i := range pending {
		id := ledger.ExecutionID("bench", fmt.Sprint("s", i%100), fmt.Sprint("t", i))
		recs = append(recs, ledger.Record{Version: ledger.RecordVersion, ID: id, Namespace: "bench",
			SessionID: fmt.Sprint("s", i%100), ToolCallID: fmt.Sprint("t", i), Connector: "payments", Operation: "create_payment",
			Effect: "external", Policy: "idempotent-retry", Args: []byte(`{"amount":100,"currency":"usd"}`), ArgsDigest: "d",
			State: ledger.StateAwaitingApproval, MaxAttempts: 3, CreatedAt: now, UpdatedAt: now,
			Approval: &ledger.Approval{ID: ledger.ApprovalID(id), ArgsDigest: "d", RequestedAt: now, ExpiresAt: now.Add(time.Hour), Decision: ledger.ApprovalPending}})
	}
	if err := db.BulkLoad(ctx, recs); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	ex, err := host.Open(ctx, host.Options{DataDir: dir, PrewarmInstances: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer ex.Close(ctx)
	for _, tc := range []struct {
		name  string
		pass  func() (host.RecoveryReport, error)
		looks int
	}{
		{"pass=every", func() (host.RecoveryReport, error) { return ex.Recover(ctx) }, pending},
		{"pass=due", func() (host.RecoveryReport, error) { return host.RecoverDue(ctx, ex) }, 0},
	} {
		b.Run(fmt.Sprintf("pending=%d/%s", pending, tc.name), func(b *testing.B) {
			for b.Loop() {
				rep, err := tc.pass()
				if err != nil {
					b.Fatal(err)
				}
				if rep.Pending != tc.looks {
					b.Fatalf("the pass looked at %d executions, want %d", rep.Pending, tc.looks)
				}
			}
		})
	}
}
