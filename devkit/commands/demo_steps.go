package commands

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/connhost/connhost/cli"
)

// demoStep is one object of the --json transcript.
type demoStep struct {
	Step  int    `json:"step"`
	Scene string `json:"scene"`
	// Kind is setup, scene, command, provider, proof, error (a part that
	// could not go on) or summary.
	Kind string `json:"kind"`
	// Say is the narration that leads to the step.
	Say string `json:"say,omitempty"`
	// Command is the command as shown to people; Args is the exact argv
	// after the binary.
	Command     string          `json:"command,omitempty"`
	Args        []string        `json:"args,omitempty"`
	CrashAt     string          `json:"crash_at,omitempty"`
	ExitCode    *int            `json:"exit_code,omitempty"`
	Killed      bool            `json:"killed,omitempty"`
	Signal      string          `json:"signal,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	ExecutionID string          `json:"execution_id,omitempty"`
	Status      string          `json:"status,omitempty"`
	Source      string          `json:"source,omitempty"`
	Receipt     string          `json:"receipt,omitempty"`
	// Code is the problem code of a refused command (session_fenced).
	Code     string         `json:"code,omitempty"`
	Events   []demoEvent    `json:"events,omitempty"`
	Provider *demoProvider  `json:"provider,omitempty"`
	Proof    []demoProofRow `json:"proof,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
	Checks   []demoCheck    `json:"checks,omitempty"`
	OK       bool           `json:"ok"`
	// Summary fields.
	Failed  []string `json:"failed,omitempty"`
	Kills   int      `json:"kills,omitempty"`
	Elapsed string   `json:"elapsed,omitempty"`
	WorkDir string   `json:"work_dir,omitempty"`
}

// demoEvent is one audit event of a history step.
type demoEvent struct {
	Seq      uint64 `json:"seq"`
	Attempt  int    `json:"attempt"`
	From     string `json:"from,omitempty"`
	To       string `json:"to"`
	Decision string `json:"decision"`
	Actor    string `json:"actor,omitempty"`
	Evidence string `json:"evidence,omitempty"`
}

// demoProvider is what the providers hold, counted through their list APIs.
type demoProvider struct {
	PaymentIntents int `json:"payment_intents"`
	Messages       int `json:"messages"`
	StripeReplays  int `json:"stripe_replays"`
	MessagesSent   int `json:"messages_sent"`
	// ForExecution counts the objects that carry the step's execution's
	// identity (PaymentIntent metadata, or the message's Message-ID).
	ForExecution *int `json:"for_execution,omitempty"`
}

// demoProofRow is one line of the final table.
type demoProofRow struct {
	ExecutionID string `json:"execution_id"`
	Tool        string `json:"tool"`
	Effect      string `json:"effect"`
	Policy      string `json:"policy"`
	State       string `json:"state"`
	Source      string `json:"source,omitempty"`
	Receipt     string `json:"receipt,omitempty"`
	// ProviderObjects counts the provider objects of this execution
	// (external effects only).
	ProviderObjects int `json:"provider_objects"`
}

// demoCheck is one assertion the demo made.
type demoCheck struct {
	What string `json:"what"`
	Got  string `json:"got,omitempty"`
	OK   bool   `json:"ok"`
}

// newStep starts a step with the pending narration.
func (d *demo) newStep(kind string) *demoStep {
	d.step++
	st := &demoStep{Step: d.step, Scene: d.scene, Kind: kind, Say: strings.Join(d.say, " "), OK: true}
	d.say = nil
	return st
}

// sayf narrates: printed at once on a terminal, attached to the next step
// with --json.
func (d *demo) sayf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	s = strings.ReplaceAll(s, d.dir, "$DEMO")
	d.say = append(d.say, s)
	d.printf("\n%s", cli.WrapText(s, 78, ""))
}

// heading starts a part.
func (d *demo) heading(scene, title string) {
	d.scene = scene
	n := map[string]int{"payment": 1, "email": 2, "manual": 3, "proof": 4}[scene]
	t := fmt.Sprintf("%d. %s", n, title)
	d.printf("\n\n%s\n%s\n", t, strings.Repeat("-", len([]rune(t))))
	if d.json {
		st := d.newStep("scene")
		st.Notes = []string{t}
		d.writeLine(st)
	}
}

// emit prints a step: its notes and checks on a terminal, one JSON line
// with --json.
func (d *demo) emit(st *demoStep) {
	if d.json {
		d.writeLine(st)
		return
	}
	if st.Command == "" && len(st.Notes) > 0 {
		d.printf("\n")
	}
	for _, n := range st.Notes {
		if n == "" {
			d.printf("\n")
			continue
		}
		d.printf("    %s\n", n)
	}
	for _, c := range st.Checks {
		if c.OK {
			d.printf("    ✓ %s\n", c.What)
		} else {
			d.printf("    ✗ CHECK FAILED: %s (got %s)\n", c.What, cli.OrDash(c.Got))
		}
	}
}

// writeLine writes one step as one line of JSON.
func (d *demo) writeLine(st *demoStep) {
	enc := json.NewEncoder(d.w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		d.cancel()
	}
}

func (d *demo) printf(format string, args ...any) {
	if !d.json {
		if _, err := fmt.Fprintf(d.w, format, args...); err != nil {
			d.cancel()
		}
	}
}

// check records an assertion in st.
func (d *demo) check(st *demoStep, what string, ok bool, got string) bool {
	d.checks++
	st.Checks = append(st.Checks, demoCheck{What: what, Got: got, OK: ok})
	if !ok {
		st.OK = false
		d.failed = append(d.failed, fmt.Sprintf("step %d (%s): %s: got %s", st.Step, st.Scene, what, cli.OrDash(got)))
	}
	return ok
}

// expect checks got == want.
func (d *demo) expect(st *demoStep, what, got, want string) bool {
	return d.check(st, what, got == want, got)
}
