package crashtest

import (
	"context"
	"strings"
	"testing"

	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/manifests"
)

// TestJudgeNamesEveryFailureClass: each way a call's answer and the
// provider's effects can disagree is a class of its own in the row and in
// the summary's counters — not only duplicates and lost calls: a call
// answered failed whose effect exists, one answered succeeded without an
// effect, an effect undone. A failure in none of the classes (a wrong
// recovery decision) counts as other.
func TestJudgeNamesEveryFailureClass(t *testing.T) {
	op := &manifests.Operation{Name: "create", Effect: manifests.EffectExternal, Recovery: manifests.PolicyReconcile}
	for _, tc := range []struct {
		name    string
		point   string
		final   string
		effects int
		// decision is recovery's first decision in the trail.
		decision string
		class    func(Row) bool
		total    func(Totals) int
		want     string
	}{
		{"applied but answered failed", crash.BeforeIntent, "failed", 1, "none",
			func(r Row) bool { return r.AppliedButFailed }, func(t Totals) int { return t.AppliedButFailed },
			"applied but answered failed"},
		{"applied but answered cancelled", crash.BeforeIntent, "cancelled", 1, "none",
			func(r Row) bool { return r.AppliedButFailed }, func(t Totals) int { return t.AppliedButFailed },
			"applied but answered cancelled"},
		{"succeeded without effect", crash.BeforeIntent, "succeeded", 0, "none",
			func(r Row) bool { return r.SucceededWithoutEffect }, func(t Totals) int { return t.SucceededWithoutEffect },
			"succeeded with 0 effects"},
		{"effect undone", crash.BeforeIntent, "succeeded", -1, "none",
			func(r Row) bool { return r.EffectUndone }, func(t Totals) int { return t.EffectsUndone },
			"effect undone"},
		{"duplicate", crash.AfterPluginReturn, "succeeded", 2, "reconciled_applied",
			func(r Row) bool { return r.Duplicate }, func(t Totals) int { return t.Duplicates },
			"2 effects at the provider for one call"},
		{"wrong decision only", crash.AfterPluginReturn, "succeeded", 1, "reconciled_not_applied",
			func(r Row) bool {
				return !r.AppliedButFailed && !r.SucceededWithoutEffect && !r.EffectUndone && !r.Duplicate
			},
			func(t Totals) int { return t.Other }, "recovery decided reconciled_not_applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cell{o: &Options{}, spec: cellSpec{point: tc.point, op: op}}
			row := Row{Point: tc.point, Operation: op.Name, Reached: true, Effects: tc.effects, Final: tc.final, Decision: tc.decision}
			res := result{Status: tc.final, Receipt: "obj_1"}
			problems := c.judge(context.Background(), &row, res, res, history{State: tc.final})
			row.Pass = len(problems) == 0
			row.Problem = strings.Join(problems, "; ")
			if row.Pass || !tc.class(row) || !strings.Contains(row.Problem, tc.want) {
				t.Fatalf("row %+v, want it failed in its class saying %q", row, tc.want)
			}
			var rep Report
			rep.add(row)
			if tc.total(rep.Totals) != 1 || rep.Totals.Failed != 1 {
				t.Errorf("totals %+v: the failure is not counted in its class", rep.Totals)
			}
		})
	}
}
