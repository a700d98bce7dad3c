package crashtest

import (
	"strings"
	"testing"
)

// TestWriteTableOneRowPerCell: a connector error that spans lines (a
// provider's error page) or holds tabs keeps one row per cell, the columns
// aligned; the totals say in how many cells the kills were.
func TestWriteTableOneRowPerCell(t *testing.T) {
	var rep Report
	rep.Connector = "hooks"
	rep.add(Row{Point: "after_plugin_return", Operation: "deliver", Policy: "reconcile", Reached: true, Kills: 1, Decision: "reconciled_applied",
		Effects: 2, Final: "succeeded", Problem: "2 effects at the provider for one call", ConnectorError: "status 502:\n<html>\n\t<b>Bad gateway</b>\r\n</html>"})
	rep.add(Row{Point: "after_reconcile_return", Operation: "deliver", Policy: "reconcile", Reached: true, Kills: 2, Decision: "reconciled_applied",
		Effects: 1, Final: "succeeded", Pass: true})
	rep.add(Row{Point: "after_reconcile_return", Operation: "get", Reached: false, Kills: 1, Decision: "recover_reread", Final: "succeeded", Pass: true})
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want a header, 3 rows and the totals:\n%s", len(lines), b.String())
	}
	col := strings.Index(lines[0], "RESULT")
	for _, l := range lines[1:4] {
		if len(l) < col || !strings.Contains("pass FAIL n/a", strings.Fields(l[col:])[0]) {
			t.Errorf("row not aligned under RESULT:\n%s", b.String())
		}
	}
	if !strings.Contains(lines[1], "the connector said: status 502: <html> <b>Bad gateway</b> </html>") {
		t.Errorf("connector error not folded onto its row: %q", lines[1])
	}
	if want := "cells 3 (n/a 1), kills survived 4 in 3 cells, failed 1, duplicates beyond policy 0, executions lost 0, " +
		"applied but answered failed 0, succeeded without effect 0, effects undone 0, receipts naming another object 0, other failures 1"; lines[4] != want {
		t.Errorf("totals %q, want %q", lines[4], want)
	}
}

// TestWriteTableTrailOfFailedCells: a failed cell's audit trail follows the
// totals, one event per line, so that a failure shows what every attempt
// met (the table keeps only the last connector error); a passing cell's
// trail is not printed.
func TestWriteTableTrailOfFailedCells(t *testing.T) {
	var rep Report
	rep.Connector = "hooks"
	rep.add(Row{Point: "after_plugin_return", Operation: "deliver", Policy: "idempotent-retry", Reached: true, Kills: 1,
		Final: "recovery_required", Problem: "want succeeded", Trail: []string{"+0.000s attempt 0 -→pending intent", "+1.500s attempt 2 dispatched→pending retry_scheduled (executor): timeout:\nline two"}})
	rep.add(Row{Point: "after_intent", Operation: "deliver", Policy: "idempotent-retry", Reached: true, Pass: true, Final: "succeeded",
		Trail: []string{"never printed"}})
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		"trail of hooks.deliver at after_plugin_return:",
		"  +0.000s attempt 0 -→pending intent",
		"  +1.500s attempt 2 dispatched→pending retry_scheduled (executor): timeout: line two",
	}
	if len(lines) != 4+len(want) {
		t.Fatalf("%d lines, want a header, 2 rows, the totals and the failed cell's trail:\n%s", len(lines), b.String())
	}
	for i, w := range want {
		if lines[4+i] != w {
			t.Errorf("line %d = %q, want %q", 4+i, lines[4+i], w)
		}
	}
}
