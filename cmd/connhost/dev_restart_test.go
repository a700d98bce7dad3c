package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
	manifestsPkg "github.com/connhost/connhost/manifests"
)

// devProc is one `connhost dev` process.
type devProc struct {
	*proc.Process
	urls map[string]string // api, payments, email
}

// startDev starts `connhost dev --json` on data, with the crash point
// crashAt armed ("" for none), and waits for its startup line.
func startDev(t *testing.T, bin, data, manifests, modules, crashAt string) *devProc {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(data), "dev.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p, err := proc.Start(proc.Cmd{Path: bin, Args: []string{"dev", "--json", "--data", data, "--manifests", manifests, "--modules", modules, "--listen", "127.0.0.1:0"},
		CrashAt: crashAt, Stderr: logf, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	d := &devProc{Process: p}
	ctx, cancel := context.WithTimeout(t.Context(), processBound)
	defer cancel()
	if err := p.DecodeLine(ctx, &d.urls); err != nil {
		log, _ := os.ReadFile(logf.Name())
		t.Fatalf("dev startup line: %v\n%s", err, log)
	}
	return d
}

// call posts one execution; it returns the error of a request the server
// died under.
func (p *devProc) call(session, toolCall, tool, args string) (host.Result, error) {
	body := fmt.Sprintf(`{"session_id":%q,"tool_call_id":%q,"tool":%q,"arguments":%s}`, session, toolCall, tool, args)
	var res host.Result
	return res, p.post("/v1/executions", body, &res)
}

func (p *devProc) post(path, body string, out any) error {
	resp, err := http.Post(p.urls["api"]+path, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// approved sends a gated call, approves it and returns the re-drive's
// result (or the error of a request the server died under).
func (p *devProc) approved(t *testing.T, session, toolCall, tool, args string) (host.Result, error) {
	t.Helper()
	res, err := p.call(session, toolCall, tool, args)
	if err != nil || res.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated call: %+v %v", res, err)
	}
	var dec host.Result
	body := fmt.Sprintf(`{"by":"rita","digest":%q}`, res.Approval.ArgsDigest)
	if err := p.post("/v1/approvals/"+res.Approval.ID+"/approve", body, &dec); err != nil {
		t.Fatalf("approve: %v", err)
	}
	return p.call(session, toolCall, tool, args)
}

// TestDevKeepsProviderStateAcrossKill runs `connhost dev` as a real
// process and kills it twice. Its sandbox keeps its state under the data
// directory, so after a SIGKILL get_payment still finds an earlier
// PaymentIntent, and after a crash inside dev between the provider's
// answer and the ledger's outcome, recovery's re-dispatch with the same
// idempotency key is replayed by the provider: one PaymentIntent, the
// receipt the provider gave before the crash.
func TestDevKeepsProviderStateAcrossKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it as a child process")
	}
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildConnhost(t, dir)
	// The shipped connectors and manifests, pinned to the modules built
	// from today's sources (TestShippedModulesAreBuiltFromPlugins checks the
	// shipped pins).
	modules, manifests := filepath.Join(dir, "modules"), filepath.Join(dir, "manifests")
	for _, d := range []string{modules, manifests} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"payments", "email"} {
		wasm, digest, err := wasmbuild.Cached(ctx, "plugins/"+name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(wasm)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, modules, name+".wasm", string(b))
		src, err := os.ReadFile(filepath.Join(root, "manifests", name+".toml"))
		if err != nil {
			t.Fatal(err)
		}
		pinned, err := manifestsPkg.SetSHA256(src, digest)
		if err != nil {
			t.Fatal(err)
		}
		if name == "payments" {
			// Outcomes synced: a lazily written outcome lost at the first
			// SIGKILL would be re-derived by a re-dispatch at open, and the
			// crash point below counts connector calls. Losing lazy
			// outcomes has its own rows in the crash matrix.
			if pinned, err = manifestsPkg.SetOperationField(pinned, "create_payment", "outcome_durability", "sync"); err != nil {
				t.Fatal(err)
			}
		}
		writeFile(t, manifests, name+".toml", string(pinned))
	}
	data := filepath.Join(dir, "data")
	const payArgs = `{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`

	// A payment, then SIGKILL.
	dev := startDev(t, bin, data, manifests, modules, "")
	first, err := dev.approved(t, "s1", "c1", "payments.create_payment", payArgs)
	if err != nil || first.Status != host.StatusSucceeded || !strings.HasPrefix(first.Receipt, "pi_") {
		t.Fatalf("payment: %+v %v", first, err)
	}
	dev.Kill()

	// Restarted on the same data: the provider remembers the payment. The
	// crash point is armed for the second connector call (the first is
	// get_payment's).
	dev = startDev(t, bin, data, manifests, modules, crash.AfterPluginReturn+":2")
	got, err := dev.call("s1", "r1", "payments.get_payment", fmt.Sprintf(`{"payment_intent":%q}`, first.Receipt))
	if err != nil || got.Status != host.StatusSucceeded || !bytes.Contains(got.Result, []byte(first.Receipt)) {
		t.Fatalf("get_payment of %s after the restart: %+v %v", first.Receipt, got, err)
	}
	if again, err := dev.call("s1", "c1", "payments.create_payment", payArgs); err != nil || again.Receipt != first.Receipt || !again.Recorded {
		t.Fatalf("the same create again: %+v %v", again, err)
	}

	// A second payment; dev kills itself after the provider applied it and
	// before the outcome is recorded.
	if res, err := dev.approved(t, "s1", "c2", "payments.create_payment", payArgs); err == nil {
		t.Fatalf("dev answered through its crash point: %+v", res)
	}
	if res, err := dev.Wait(t.Context()); err != nil || !res.Killed() {
		t.Fatalf("dev ended: %s %v, want killed at %s", res, err, crash.AfterPluginReturn)
	}
	before, err := os.ReadFile(filepath.Join(data, "sandbox", sandbox.StripeStateFile))
	if err != nil {
		t.Fatal(err)
	}

	// Opening runs recovery: idempotent-retry re-dispatches with the same
	// key and the provider replays its saved answer.
	dev = startDev(t, bin, data, manifests, modules, "")
	second, err := dev.call("s1", "c2", "payments.create_payment", payArgs)
	if err != nil || second.Status != host.StatusSucceeded || !second.Recorded || !bytes.Contains(before, []byte(second.Receipt)) {
		t.Fatalf("the crashed create after the restart: %+v %v", second, err)
	}
	prov := sandbox.NewClient(dev.urls["payments"], dev.urls["email"])
	pis, err := prov.PaymentIntents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, pi := range pis {
		ids = append(ids, pi.ID)
	}
	slices.Sort(ids)
	want := []string{first.Receipt, second.Receipt}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("PaymentIntents at the provider %v, want %v", ids, want)
	}
	st, err := prov.PaymentsStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.PaymentIntentsCreated != 2 || st.Replays < 1 {
		t.Fatalf("provider stats %+v: want 2 intents created and the recovery's replay", st)
	}
	dev.Kill()
}
