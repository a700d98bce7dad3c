package commands

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// TestDemo builds connhost, runs `connhost demo --json` as a subprocess and
// checks its transcript: three calls killed by SIGKILL at
// after_plugin_return, the recovery decision of each policy, the fenced
// session and one provider object per effect.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs a few dozen child processes")
	}
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "connhost")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/connhost")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The binary alone, in an empty directory: the demo runs on the
	// connectors built into it (package connhost), as after go install.
	empty := filepath.Join(tmp, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := proc.Run(ctx, proc.Cmd{Path: bin, Args: []string{"demo", "--json"}, Dir: empty, DieWithParent: true})
	if err != nil || res.Code != 0 || res.Signal != 0 {
		t.Fatalf("connhost demo --json: %s %v\nstdout:\n%s\nstderr:\n%s", res, err, res.Stdout, res.Stderr)
	}
	t.Logf("demo took %s", time.Since(start).Round(100*time.Millisecond))

	var steps []demoStep
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var st demoStep
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			t.Fatalf("line %d is not a JSON step: %v\n%s", len(steps)+1, err, sc.Bytes())
		}
		if st.Step != len(steps)+1 {
			t.Errorf("line %d: step %d", len(steps)+1, st.Step)
		}
		if !st.OK {
			t.Errorf("step %d (%s) not ok: %+v", st.Step, st.Scene, st.Checks)
		}
		steps = append(steps, st)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 {
		t.Fatal("no steps")
	}
	sum := steps[len(steps)-1]
	if sum.Kind != "summary" || !sum.OK || sum.Kills != 3 || len(sum.Failed) > 0 {
		t.Errorf("summary = %+v", sum)
	}

	// One process killed by SIGKILL at after_plugin_return per call.
	killed := map[string]string{}
	for _, st := range steps {
		if st.CrashAt == "" {
			continue
		}
		if st.CrashAt != crash.AfterPluginReturn || !st.Killed || st.Signal != "SIGKILL" || st.ExecutionID == "" {
			t.Errorf("step %d: crash step %+v", st.Step, st)
			continue
		}
		killed[st.Scene] = st.ExecutionID
	}
	ids := map[string]bool{}
	for _, scene := range []string{"payment", "email", "manual"} {
		if killed[scene] == "" {
			t.Errorf("part %s: no process killed by SIGKILL at after_plugin_return", scene)
		}
		ids[killed[scene]] = true
	}
	if len(ids) != 3 {
		t.Errorf("killed executions %v: want three distinct", killed)
	}

	// The recovery decisions, from the audit trails.
	decisions := func(scene, id string) []demoEvent {
		for _, st := range steps {
			if st.Scene == scene && st.ExecutionID == id && len(st.Events) > 0 {
				return st.Events
			}
		}
		t.Errorf("part %s: no history of %s", scene, id)
		return nil
	}
	find := func(evs []demoEvent, decision string) int {
		return slices.IndexFunc(evs, func(e demoEvent) bool { return e.Decision == decision })
	}
	if evs := decisions("payment", killed["payment"]); len(evs) > 0 {
		i := find(evs, "recover_retry")
		if i < 0 || evs[i].Attempt != 2 || evs[len(evs)-1].To != "succeeded" {
			t.Errorf("payment: events %+v: want recover_retry at attempt 2, then succeeded", evs)
		}
	}
	if evs := decisions("email", killed["email"]); len(evs) > 0 {
		i := find(evs, "reconciled_applied")
		if i < 0 || evs[i].To != "succeeded" || find(evs, "recover_retry") >= 0 {
			t.Errorf("email: events %+v: want reconciled_applied → succeeded and no re-dispatch", evs)
		}
	}
	if evs := decisions("manual", killed["manual"]); len(evs) > 0 {
		i, j := find(evs, "manual_policy"), find(evs, "operator_applied")
		if i < 0 || evs[i].To != "recovery_required" || j < i || evs[j].To != "succeeded" || evs[j].Actor != demoOperator {
			t.Errorf("manual: events %+v: want manual_policy → recovery_required, then operator_applied by %s → succeeded", evs, demoOperator)
		}
	}
	var recoveryRequired, fenced, resolved bool
	for _, st := range steps {
		if st.Scene != "manual" || st.Kind != "command" || st.ExitCode == nil {
			continue
		}
		switch {
		case st.ExecutionID == killed["manual"] && st.Status == "recovery_required" && *st.ExitCode == cli.ExitRecoveryRequired:
			recoveryRequired = true
		case st.Code == "session_fenced" && *st.ExitCode == cli.ExitRecoveryRequired:
			fenced = true
		case st.Source == "operator" && st.Status == "succeeded":
			resolved = true
		}
	}
	if !recoveryRequired || !fenced || !resolved {
		t.Errorf("manual part: recovery_required %t, session_fenced refusal %t, operator resolution %t", recoveryRequired, fenced, resolved)
	}

	// Provider counts: exactly one object per effect.
	var proof *demoStep
	for i := range steps {
		if steps[i].Kind == "proof" {
			proof = &steps[i]
		}
	}
	if proof == nil {
		t.Fatal("no proof step")
	}
	if p := proof.Provider; p == nil || p.PaymentIntents != 2 || p.Messages != 1 {
		t.Errorf("provider totals %+v: want 2 PaymentIntents, 1 message", proof.Provider)
	}
	external := 0
	for _, row := range proof.Proof {
		if row.Effect != string(manifests.EffectExternal) {
			continue
		}
		external++
		if row.State != "succeeded" || row.ProviderObjects != 1 {
			t.Errorf("proof row %+v: want succeeded with exactly 1 provider object", row)
		}
		if !ids[row.ExecutionID] {
			t.Errorf("proof row %+v: not one of the killed executions %v", row, killed)
		}
	}
	if external != 3 {
		t.Errorf("%d external executions in the proof, want 3: %+v", external, proof.Proof)
	}
}
