package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // 24 bytes, base64

// verifyStandardWebhook checks a request as a Standard Webhooks receiver
// does, written from the spec and not from Sign: the secret without its
// "whsec_" prefix, base64-decoded, is the HMAC-SHA256 key over
// "{webhook-id}.{webhook-timestamp}.{body}"; webhook-signature is a
// space-delimited list of "v1,<base64>" entries, one of which must match
// (constant time); the timestamp is within five minutes of now.
func verifyStandardWebhook(secret string, h http.Header, body []byte, now time.Time) string {
	id, ts, sigs := h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature")
	if id == "" || ts == "" || sigs == "" {
		return "missing a webhook-* header"
	}
	if strings.Contains(id, ".") {
		return "webhook-id holds a full stop"
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || math.Abs(float64(now.Unix()-sec)) > 300 {
		return "webhook-timestamp " + ts + " is not within 5 minutes"
	}
	key, err := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	if err != nil {
		return "bad test secret"
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, b64, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return ""
		}
	}
	return "no v1 signature matches"
}

type received struct {
	header http.Header
	body   []byte
}

// receiver is a webhook receiver answering statuses in turn (200 after
// them).
type receiver struct {
	mu       sync.Mutex
	got      []received
	statuses []int
	arrived  chan struct{}
}

func newReceiver(t *testing.T, statuses ...int) (*receiver, *httptest.Server) {
	r := &receiver{statuses: statuses, arrived: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), b})
		status := http.StatusNoContent
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		r.arrived <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) wait(t *testing.T, n int) []received {
	t.Helper()
	for range n {
		select {
		case <-r.arrived:
		case <-time.After(30 * time.Second):
			t.Fatalf("the receiver got %d requests, want %d", len(r.got), n)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func testKey(t *testing.T) []byte {
	k, err := ParseSecret(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func approvalNotice() Notice {
	exp := time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC)
	return Notice{Type: TypeAwaitingApproval, ExecutionID: "ex_1", ApprovalID: "ap_1", Tool: "payments.create_payment",
		Namespace: "default", SessionID: "s1", State: "awaiting_approval", Since: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		ExpiresAt: &exp, ConsoleURL: "https://connhost.example.com/ui/executions/ex_1", Command: "connhost approve ap_1"}
}

// TestWebhookSignedAndRetried: a receiver that answers 500 gets the same
// notice again, with the same webhook-id, each delivery signed as the
// Standard Webhooks spec says; the body carries what a human needs.
func TestWebhookSignedAndRetried(t *testing.T) {
	rcv, srv := newReceiver(t, http.StatusInternalServerError)
	wh, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hook", Key: testKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	n, err := New(Options{Registry: reg, Backoff: 10 * time.Millisecond}, wh)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); n.Wait() }()
	n.Start(ctx)
	n.Notify(approvalNotice())
	got := rcv.wait(t, 2)
	for i, r := range got {
		if why := verifyStandardWebhook(testSecret, r.header, r.body, time.Now()); why != "" {
			t.Errorf("delivery %d: %s", i+1, why)
		}
		if why := verifyStandardWebhook("whsec_"+base64.StdEncoding.EncodeToString([]byte("another key of 24 bytes!")), r.header, r.body, time.Now()); why == "" {
			t.Errorf("delivery %d verifies under another key", i+1)
		}
	}
	if got[0].header.Get("Webhook-Id") != got[1].header.Get("Webhook-Id") || got[0].header.Get("Webhook-Id") != approvalNotice().ID() {
		t.Errorf("webhook-id %q then %q, want %q both times", got[0].header.Get("Webhook-Id"), got[1].header.Get("Webhook-Id"), approvalNotice().ID())
	}
	var b struct {
		Type      string
		Timestamp time.Time
		Data      map[string]any
	}
	if err := json.Unmarshal(got[1].body, &b); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"execution_id": "ex_1", "approval_id": "ap_1", "tool": "payments.create_payment", "namespace": "default",
		"session_id": "s1", "state": "awaiting_approval", "expires_at": "2026-05-01T13:00:00Z",
		"console_url": "https://connhost.example.com/ui/executions/ex_1"}
	if b.Type != TypeAwaitingApproval || !b.Timestamp.Equal(approvalNotice().Since) {
		t.Errorf("type %q timestamp %v", b.Type, b.Timestamp)
	}
	for k, v := range want {
		if b.Data[k] != v {
			t.Errorf("data.%s = %v, want %v", k, b.Data[k], v)
		}
	}
	waitCount(t, reg, "delivered", 1)
	if c := count(t, reg, "retried"); c != 1 {
		t.Errorf("retried %v, want 1", c)
	}
}

func count(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// waitCount waits for the counter of outcome to reach want: it counts
// after the receiver has answered.
func waitCount(t *testing.T, reg *prometheus.Registry, outcome string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); count(t, reg, outcome) != want; {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", outcome, count(t, reg, outcome), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWebhookRefusals: a host outside allow_hosts is refused when the
// webhook is configured, plain http only goes to loopback, and a
// redirect is neither followed nor retried.
func TestWebhookRefusals(t *testing.T) {
	for _, c := range []struct {
		name, url string
		allow     []string
		want      string
	}{
		{"host not listed", "https://hooks.example.com/x", []string{"other.example.com"}, "not in [notify] allow_hosts"},
		{"no allowlist", "https://hooks.example.com/x", nil, "not in [notify] allow_hosts"},
		{"metadata by IP", "http://169.254.169.254/latest", nil, "not in [notify] allow_hosts"},
		{"plain http off loopback", "http://hooks.example.com/x", []string{"hooks.example.com"}, "use https"},
		{"credentials", "https://u:p@hooks.example.com/x", []string{"hooks.example.com"}, "no user or password"},
		{"not a URL", "hooks.example.com", []string{"hooks.example.com"}, "want an http or https URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewWebhook(WebhookOptions{URL: c.url, AllowHosts: c.allow, Key: testKey(t)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), ":p@") {
				t.Fatalf("the password is in the error: %v", err)
			}
		})
	}
	if _, err := CheckWebhookURL("https://Hooks.Example.com/x", []string{"hooks.example.com"}); err != nil {
		t.Errorf("a listed host (other case): %v", err)
	}

	// A redirect to a host of the allowlist's choosing is not followed.
	elsewhere, other := newReceiver(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	wh, err := NewWebhook(WebhookOptions{URL: redirect.URL, Key: testKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = wh.Deliver(context.Background(), approvalNotice())
	if err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), "307") {
		t.Fatalf("redirect: %v, want a permanent failure naming 307", err)
	}
	if len(elsewhere.got) != 0 {
		t.Fatalf("the redirect was followed")
	}
}

// TestNotifyNeverBlocks: while the receiver hangs, Notify returns at
// once; what does not fit the queue is coalesced and counted.
func TestNotifyNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	inFlight := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
		default:
		}
		<-hang
	}))
	defer srv.Close()
	defer close(hang)
	wh, err := NewWebhook(WebhookOptions{URL: srv.URL, Key: testKey(t), Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	const size = 4
	n, err := New(Options{Registry: reg, QueueSize: size}, wh)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); n.Wait() }()
	n.Start(ctx)
	n.Notify(approvalNotice())
	<-inFlight // the worker holds the first, hanging
	for range size + 5 {
		n.Notify(approvalNotice()) // a blocking Notify hangs the test here
	}
	if c := count(t, reg, "coalesced"); c != 5 {
		t.Fatalf("coalesced %v, want 5", c)
	}
	for _, oc := range []string{"delivered", "failed", "retried", "dropped"} {
		if c := count(t, reg, oc); c != 0 {
			t.Errorf("%s %v, want 0", oc, c)
		}
	}
}

// TestWebhookGivesUp: a receiver failing every time gets MaxAttempts
// deliveries, then the notice counts as failed.
func TestWebhookGivesUp(t *testing.T) {
	rcv, srv := newReceiver(t, 503, 503, 503, 503)
	wh, err := NewWebhook(WebhookOptions{URL: srv.URL, Key: testKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	n, err := New(Options{Registry: reg, MaxAttempts: 3, Backoff: time.Millisecond}, wh)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); n.Wait() }()
	n.Start(ctx)
	n.Notify(approvalNotice())
	rcv.wait(t, 3)
	waitCount(t, reg, "failed", 1)
	if c := count(t, reg, "retried"); c != 2 {
		t.Errorf("retried %v, want 2", c)
	}
}

func TestParseSecret(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `starts with "whsec_"`},
		{"whsec_not base64!", "not base64"},
		{"whsec_" + base64.StdEncoding.EncodeToString([]byte("short")), "5 bytes, want 24 to 64"},
	} {
		if _, err := ParseSecret(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSecret(%q): %v, want %q", c.in, err, c.want)
		}
	}
}

// TestNoticeID: one wait has one id, whoever announces it; another wait
// of the same call has another; no id holds a full stop.
func TestNoticeID(t *testing.T) {
	a, b := approvalNotice(), approvalNotice()
	b.Since = b.Since.Add(time.Second)
	c := approvalNotice()
	c.Type = TypeRecoveryRequired
	if a.ID() != approvalNotice().ID() || a.ID() == b.ID() || a.ID() == c.ID() || strings.Contains(a.ID(), ".") {
		t.Fatalf("ids %s %s %s", a.ID(), b.ID(), c.ID())
	}
}
