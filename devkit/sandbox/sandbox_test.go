package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/mailpit"
	"github.com/connhost/connhost/devkit/testing/testenv"
)

func start(t *testing.T, opts sandbox.Options) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
	})
	return sb
}

func charge(t *testing.T, base, execID, key string) int {
	t.Helper()
	form := url.Values{"amount": {"2000"}, "currency": {"usd"}, "confirm": {"true"}, "payment_method": {"pm_card_visa"}, "metadata[connhost_execution_id]": {execID}}
	req, _ := http.NewRequest("POST", base+"/v1/payment_intents", strings.NewReader(form.Encode()))
	req.Header.Set("Authorization", "Bearer sk_test_x")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func sendMail(t *testing.T, base, messageID string) {
	t.Helper()
	b, _ := json.Marshal(mailpit.SendRequest{
		From:    mailpit.SendAddress{Email: "agent@connhost.test"},
		To:      []mailpit.SendAddress{{Email: "user@example.com"}},
		Subject: "hi",
		Headers: map[string]string{"Message-ID": messageID},
	})
	resp, err := http.Post(base+"/api/v1/send", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("send: %d", resp.StatusCode)
	}
}

func TestStartServesBothOnDistinctPorts(t *testing.T) {
	sb := start(t, sandbox.Options{})
	p, _ := url.Parse(sb.PaymentsURL())
	e, _ := url.Parse(sb.EmailURL())
	if p.Hostname() != "127.0.0.1" || e.Hostname() != "127.0.0.1" || p.Port() == e.Port() || p.Port() == "0" {
		t.Fatalf("payments %s email %s", sb.PaymentsURL(), sb.EmailURL())
	}
	b, _ := json.Marshal(sb.URLs())
	if want := `{"payments":"` + sb.PaymentsURL() + `","email":"` + sb.EmailURL() + `"}`; string(b) != want {
		t.Fatalf("URLs JSON %s, want %s", b, want)
	}
	ctx := t.Context()
	c := sb.Client()
	if st := charge(t, sb.PaymentsURL(), "exec-1", "k1"); st != 200 {
		t.Fatalf("charge: %d", st)
	}
	if st := charge(t, sb.PaymentsURL(), "exec-1", "k1"); st != 200 {
		t.Fatalf("replayed charge: %d", st)
	}
	charge(t, sb.PaymentsURL(), "exec-2", "k2")
	if n, err := c.CountPaymentIntents(ctx); err != nil || n != 2 {
		t.Fatalf("count %d %v", n, err)
	}
	found, err := c.FindPaymentIntents(ctx, "connhost_execution_id", "exec-1")
	if err != nil || len(found) != 1 {
		t.Fatalf("find %v %v", found, err)
	}
	if st, err := c.PaymentsStats(ctx); err != nil || st.Replays != 1 || st.PaymentIntentsCreated != 2 {
		t.Fatalf("stats %+v %v", st, err)
	}
	if n, err := c.CountRefunds(ctx); err != nil || n != 0 {
		t.Fatalf("refunds %d %v", n, err)
	}
	sendMail(t, sb.EmailURL(), "<a@connhost.test>")
	if n, err := c.CountMessages(ctx); err != nil || n != 1 {
		t.Fatalf("messages %d %v", n, err)
	}
}

// Client pages through lists larger than one page.
func TestClientPaging(t *testing.T) {
	sb := start(t, sandbox.Options{})
	for i := range 105 {
		charge(t, sb.PaymentsURL(), "exec", "")
		_ = i
	}
	if n, err := sb.Client().CountPaymentIntents(t.Context()); err != nil || n != 105 {
		t.Fatalf("count %d %v", n, err)
	}
}

// FindMessagesByMessageID must compare exactly although Mailpit's search
// is a substring match: checked on the emulator and on the real Mailpit.
func TestFindMessagesByMessageIDIsExact(t *testing.T) {
	sb := start(t, sandbox.Options{})
	for name, base := range map[string]string{"emulator": sb.EmailURL(), "mailpit": testenv.Mailpit(t)} {
		t.Run(name, func(t *testing.T) {
			c := sandbox.NewClient("", base)
			sendMail(t, base, "<exec-5@connhost.test>")
			sendMail(t, base, "<exec-55@connhost.test>")
			sendMail(t, base, "<exec-5@connhost.test>") // a duplicate effect
			got, err := c.FindMessagesByMessageID(t.Context(), "exec-5@connhost.test")
			if err != nil || len(got) != 2 {
				t.Fatalf("found %d (%v), want the 2 exact matches", len(got), err)
			}
			got, err = c.FindMessagesByMessageID(t.Context(), "<exec-55@connhost.test>")
			if err != nil || len(got) != 1 {
				t.Fatalf("found %d (%v), want 1", len(got), err)
			}
			if got, _ := c.FindMessagesByMessageID(t.Context(), "exec-"); len(got) != 0 {
				t.Fatalf("a prefix matched exactly: %d", len(got))
			}
			all, err := c.Messages(t.Context())
			if err != nil || len(all) != 3 {
				t.Fatalf("messages %d %v", len(all), err)
			}
			if err := c.DeleteMessages(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestClientFaultsAndClock(t *testing.T) {
	sb := start(t, sandbox.Options{SearchLag: time.Minute})
	ctx := t.Context()
	c := sb.Client()
	if err := c.AddPaymentsFault(ctx, fault.Rule{Kind: fault.Status, Status: 503}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddEmailFault(ctx, fault.Rule{Kind: fault.Status, Status: 500, Path: "/api/v1/send"}); err != nil {
		t.Fatal(err)
	}
	if st := charge(t, sb.PaymentsURL(), "x", ""); st != 503 {
		t.Fatalf("payments fault: %d", st)
	}
	b, _ := json.Marshal(mailpit.SendRequest{From: mailpit.SendAddress{Email: "a@b.c"}, To: []mailpit.SendAddress{{Email: "d@e.f"}}})
	resp, err := http.Post(sb.EmailURL()+"/api/v1/send", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("email fault: %d", resp.StatusCode)
	}
	if n, _ := c.CountMessages(ctx); n != 0 {
		t.Fatal("a pre-execution fault stored a message")
	}
	if err := c.AddPaymentsFault(ctx, fault.Rule{Kind: "bogus"}); err == nil {
		t.Fatal("bogus rule accepted")
	} else if se := (*sandbox.StatusError)(nil); !errors.As(err, &se) || se.Status != 400 {
		t.Fatalf("error %v", err)
	}
	if err := c.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ReleaseHeld(ctx); err != nil {
		t.Fatal(err)
	}
	charge(t, sb.PaymentsURL(), "lagged", "")
	if err := c.SetSearchLag(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.AdvanceClock(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := time.Until(sb.Payments().Now()); got < 59*time.Second {
		t.Fatalf("clock offset %s", got)
	}
	if st, err := c.EmailStats(ctx); err != nil || st.FaultsInjected != 1 {
		t.Fatalf("email stats %+v %v", st, err)
	}
}

func TestOptions(t *testing.T) {
	o := sandbox.Options{Listen: "127.0.0.1:12111"}
	if err := o.EnsureDefaults(); err != nil || o.EmailListen != "127.0.0.1:12112" {
		t.Fatalf("EmailListen %q %v", o.EmailListen, err)
	}
	o = sandbox.Options{}
	if err := o.EnsureDefaults(); err != nil || o.Listen != "127.0.0.1:0" || o.EmailListen != "127.0.0.1:0" {
		t.Fatalf("%+v %v", o, err)
	}
	err := sandbox.Options{Listen: "nope", EmailListen: "also nope", SearchLag: -1, IdempotencyRetention: -1}.Validate()
	for _, want := range []string{"Listen", "EmailListen", "SearchLag", "IdempotencyRetention"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v, want it to mention %s", err, want)
		}
	}
	if _, err := sandbox.Start(t.Context(), sandbox.Options{SearchLag: -1}); err == nil {
		t.Fatal("Start accepted invalid options")
	}
}

// The sandbox stops when its context ends, and Close can be called again.
func TestContextStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	sb, err := sandbox.Start(ctx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := http.Get(sb.PaymentsURL() + "/_sandbox/stats"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still serving after the context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
}

// Close releases held requests instead of waiting for them forever.
func TestCloseReleasesHeld(t *testing.T) {
	sb, err := sandbox.Start(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Payments().Faults().Add(fault.Rule{Kind: fault.Hold}); err != nil {
		t.Fatal(err)
	}
	done := make(chan int)
	go func() { done <- charge(t, sb.PaymentsURL(), "held", "") }()
	if err := sb.Payments().Faults().WaitHeld(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if st := <-done; st != 200 {
		t.Fatalf("held request after Close: %d", st)
	}
}

// TestSandboxReleases: the sandbox's e-mail emulator has a relay (to
// itself), so the email connector's release_message works against
// connhost sandbox and dev: the released copy is a new message.
func TestSandboxReleases(t *testing.T) {
	sb := start(t, sandbox.Options{Listen: "127.0.0.1:0"})
	resp, err := http.Post(sb.EmailURL()+"/api/v1/send", "application/json",
		strings.NewReader(`{"From":{"Email":"a@example.com"},"To":[{"Email":"b@example.com"}],"Subject":"s","Text":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	var sent mailpit.SendResponse
	_ = json.NewDecoder(resp.Body).Decode(&sent)
	resp.Body.Close()
	resp, err = http.Post(sb.EmailURL()+"/api/v1/message/"+sent.ID+"/release", "application/json", strings.NewReader(`{"To":["ext@example.com"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("release: %s", resp.Status)
	}
	c := sandbox.NewClient(sb.PaymentsURL(), sb.EmailURL())
	if n, err := c.CountMessages(t.Context()); err != nil || n != 2 {
		t.Fatalf("%d messages, %v: want the original and the released copy", n, err)
	}
}
