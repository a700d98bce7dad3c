package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server"
)

const notifySecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookReceiver is a webhook receiver: each request is verified as the
// Standard Webhooks spec says (HMAC-SHA256 keyed by the base64 after
// "whsec_", over "id.timestamp.body", one of the space-separated "v1,"
// signatures matching) and handed to the test with its arrival time.
type hookReceiver struct {
	mu sync.Mutex
	// answer is the status of the next requests (0: 204); hang holds
	// them until it is closed.
	answer []int
	hang   chan struct{}
	got    chan hookDelivery
}

type hookDelivery struct {
	at       time.Time
	id       string
	verified bool
	body     struct {
		Type string
		Data map[string]any
	}
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	b, _ := io.ReadAll(r.Body)
	d := hookDelivery{at: at, id: r.Header.Get("webhook-id")}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(notifySecret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(d.id + "." + r.Header.Get("webhook-timestamp") + "." + string(b)))
	for _, s := range strings.Fields(r.Header.Get("webhook-signature")) {
		if sig, ok := strings.CutPrefix(s, "v1,"); ok {
			raw, err := base64.StdEncoding.DecodeString(sig)
			d.verified = d.verified || (err == nil && hmac.Equal(raw, mac.Sum(nil)))
		}
	}
	_ = json.Unmarshal(b, &d.body)
	h.mu.Lock()
	status, hang := http.StatusNoContent, h.hang
	if len(h.answer) > 0 {
		status, h.answer = h.answer[0], h.answer[1:]
	}
	h.mu.Unlock()
	h.got <- d
	if hang != nil {
		<-hang
	}
	w.WriteHeader(status)
}

func (h *hookReceiver) next(t *testing.T) hookDelivery {
	t.Helper()
	select {
	case d := <-h.got:
		return d
	case <-time.After(processBound):
		t.Fatal("the webhook received nothing")
	}
	return hookDelivery{}
}

// TestNotificationWebhook runs connhost serve as a real process with a
// [notify] webhook: a call that starts to await approval reaches the
// receiver signed, with its ids and a console link; a 500 is retried
// with the same webhook-id; a call that needs an operator and the session
// it fences are told too; and while the receiver hangs, calls answer as
// before.
func TestNotificationWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it")
	}
	rcv := &hookReceiver{answer: []int{http.StatusInternalServerError}, got: make(chan hookDelivery, 64)}
	hook := httptest.NewServer(rcv)
	defer hook.Close()

	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	global := []string{"--data", d.data, "--manifests", mdir, "--modules", d.modules}
	const runtimeTok = "tok-runtime-0123456789"
	cfg := writeFile(t, tmp, "connhost.toml", `[server]
token_env = "T_RUNTIME"
public_url = "https://connhost.example.com"

[notify]
webhook_url = "`+hook.URL+`/connhost"
secret_env = "T_HOOK_SECRET"
`)
	env := cliEnv("T_RUNTIME="+runtimeTok, "T_HOOK_SECRET="+notifySecret)
	startServer(t, bin, env, "serving the HTTP API", append([]string{"--json", "serve", "--config", cfg, "--listen", "127.0.0.1:0"}, global...)...)
	si, err := readServerInfo(d.data)
	if err != nil {
		t.Fatal(err)
	}

	var gated host.Result
	apiCall(t, si.URL, runtimeTok, "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": "c1", "tool": "gated.echo", "arguments": map[string]string{"msg": "hi"}}, &gated)
	answered := time.Now()
	if gated.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated call: %+v", gated)
	}
	first := rcv.next(t)
	t.Logf("awaiting_approval answered → the webhook received it: %v", first.at.Sub(answered).Round(100*time.Microsecond))
	retry := rcv.next(t)
	for i, d := range []hookDelivery{first, retry} {
		if !d.verified {
			t.Errorf("delivery %d: the signature does not verify", i+1)
		}
	}
	if first.id == "" || retry.id != first.id {
		t.Errorf("webhook-id %q, then after the 500 %q: want one id", first.id, retry.id)
	}
	data := retry.body.Data
	if retry.body.Type != "execution.awaiting_approval" || data["execution_id"] != gated.ExecutionID || data["approval_id"] != gated.Approval.ID ||
		data["tool"] != "gated.echo" || data["session_id"] != "s1" || data["namespace"] != "default" || data["state"] != "awaiting_approval" ||
		data["expires_at"] == nil || data["console_url"] != "https://connhost.example.com/ui/executions/"+gated.ExecutionID {
		t.Errorf("body: %s %v", retry.body.Type, data)
	}

	var uncertain host.Result
	apiCall(t, si.URL, runtimeTok, "/v1/executions", map[string]any{"session_id": "s-old", "tool_call_id": "c1", "tool": "noop.echo", "arguments": map[string]string{}, "resumed": true}, &uncertain)
	if uncertain.Status != host.StatusRecoveryRequired {
		t.Fatalf("resumed call: %+v", uncertain)
	}
	types := map[string]map[string]any{}
	for range 2 {
		d := rcv.next(t)
		types[d.body.Type] = d.body.Data
	}
	if r := types["execution.recovery_required"]; r == nil || r["execution_id"] != uncertain.ExecutionID || !strings.Contains(r["why"].(string), "resumed_without_record") {
		t.Errorf("recovery_required notice: %v", types)
	}
	if f := types["session.fenced"]; f == nil || f["session_id"] != "s-old" || f["console_url"] != "https://connhost.example.com/ui/recovery" {
		t.Errorf("session.fenced notice: %v", types)
	}

	// A receiver that hangs holds no call up.
	rcv.mu.Lock()
	rcv.hang = make(chan struct{})
	rcv.mu.Unlock()
	defer close(rcv.hang)
	for i, call := range []string{"c2", "c3", "c4"} {
		var res host.Result
		apiCall(t, si.URL, runtimeTok, "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": call, "tool": "gated.echo", "arguments": map[string]string{"msg": call}}, &res)
		if res.Status != host.StatusAwaitingApproval {
			t.Fatalf("gated call %s with the receiver hanging: %+v", call, res)
		}
		if i == 0 {
			rcv.next(t) // it is in flight, and hangs
		}
	}
	if m := scrape(t, si.URL, runtimeTok); !strings.Contains(m, `connhost_notifications_total{channel="webhook",outcome="delivered"} 3`+"\n") ||
		!strings.Contains(m, `connhost_notifications_total{channel="webhook",outcome="retried"} 1`+"\n") {
		t.Errorf("/metrics:\n%s", grepLines(m, "connhost_notifications_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestNotifyConfig: a webhook outside its allowlist, or without its
// secret, refuses to start, naming the file and line.
func TestNotifyConfig(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "HOOK_SECRET" {
			return notifySecret, true
		}
		return "", false
	}
	for _, c := range []struct{ name, toml, want string }{
		{"host outside allow_hosts", "[notify]\nwebhook_url = \"https://hooks.example.com/x\"\nsecret_env = \"HOOK_SECRET\"\nallow_hosts = [\"other.example.com\"]\n",
			"c.toml:2: webhook host hooks.example.com is not in [notify] allow_hosts (other.example.com)"},
		{"no secret", "[notify]\nwebhook_url = \"http://127.0.0.1:9/x\"\n", "c.toml:2: a webhook needs its signing secret"},
		{"secret unset", "[notify]\nwebhook_url = \"http://127.0.0.1:9/x\"\nsecret_env = \"NOPE\"\n", "c.toml:3: environment variable NOPE (secret_env) is not set"},
		{"unknown key", "[notify]\nurl = \"x\"\n", "c.toml:2: unknown key url in [notify]"},
		{"public_url", "[server]\npublic_url = \"connhost.example.com\"\n", "c.toml:2: public_url must be an http or https URL"},
		{"tls_cert alone", "[server]\ntls_cert = \"c.pem\"\n", "c.toml:2: set tls_cert and tls_key together"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := server.ParseConfig("c.toml", []byte(c.toml), env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	cfg, err := server.ParseConfig("c.toml", []byte("[notify]\nwebhook_url = \"https://hooks.example.com/x\"\nsecret_env = \"HOOK_SECRET\"\nallow_hosts = [\"hooks.example.com\"]\n"), env)
	if err != nil || len(cfg.Notify.Key) != 24 {
		t.Fatalf("a listed host: %v", err)
	}
}

// TestDevMailsNotifications runs connhost dev as a real process with
// --email-url naming a real Mailpit: a call that starts to await
// approval arrives there as a mail tagged connhost-notification, with
// the console link.
func TestDevMailsNotifications(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it")
	}
	mailpit := testenv.Mailpit(t)
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	global := []string{"--data", d.data, "--manifests", "testdata/manifests", "--modules", d.modules}
	// dev also takes a [notify] webhook from its --config.
	rcv := &hookReceiver{got: make(chan hookDelivery, 64)}
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	cfg := writeFile(t, tmp, "connhost.toml", `[notify]
webhook_url = "`+hook.URL+`/connhost"
secret_env = "T_HOOK_SECRET"
`)
	startServer(t, bin, cliEnv("T_HOOK_SECRET="+notifySecret), "serving the HTTP API", append([]string{"--json", "dev", "--config", cfg, "--listen", "127.0.0.1:0", "--email-url", mailpit}, global...)...)
	si, err := readServerInfo(d.data)
	if err != nil {
		t.Fatal(err)
	}
	var res host.Result
	apiCall(t, si.URL, "", "/v1/executions", map[string]any{"session_id": "s1", "tool_call_id": "c1", "tool": "gated.echo", "arguments": map[string]string{}}, &res)
	answered := time.Now()
	if res.Status != host.StatusAwaitingApproval {
		t.Fatalf("gated call: %+v", res)
	}
	if got := rcv.next(t); !got.verified || got.body.Type != "execution.awaiting_approval" {
		t.Errorf("dev's webhook delivery: type %q, signature verified %v", got.body.Type, got.verified)
	}
	var found struct {
		Messages []struct {
			ID      string
			Subject string
			To      []struct{ Address string }
			Tags    []string
		} `json:"messages"`
	}
	for deadline := time.Now().Add(processBound); len(found.Messages) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no notification mail in Mailpit")
		}
		resp, err := http.Get(mailpit + "/api/v1/search?query=" + url.QueryEscape("tag:connhost-notification"))
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&found)
		resp.Body.Close()
	}
	t.Logf("awaiting_approval answered → the mail found in Mailpit: %v (polled every 20ms)", time.Since(answered).Round(time.Millisecond))
	m := found.Messages[0]
	if !strings.Contains(m.Subject, "gated.echo awaits approval") || len(m.To) != 1 || m.To[0].Address != "reviewer@localhost" {
		t.Errorf("mail: %+v", m)
	}
	resp, err := http.Get(mailpit + "/api/v1/message/" + m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var full struct{ Text string }
	if err := json.NewDecoder(resp.Body).Decode(&full); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Open it: " + si.URL + "/ui/executions/" + res.ExecutionID, "connhost approve " + res.Approval.ID, "session       s1"} {
		if !strings.Contains(full.Text, want) {
			t.Errorf("mail text lacks %q:\n%s", want, full.Text)
		}
	}
}
