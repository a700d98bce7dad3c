package mailpit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/mailpit"
)

// Emulator-only behaviour: faults and statistics. Sends have no
// idempotency, so every applied fault is one more message.
func TestFaults(t *testing.T) {
	cases := []struct {
		name         string
		rule         fault.Rule
		wantErr      bool
		wantStatus   int
		wantMessages int
	}{
		{"500 before sending", fault.Rule{Kind: fault.Status}, false, 500, 0},
		{"503 before sending", fault.Rule{Kind: fault.Status, Status: 503}, false, 503, 0},
		{"HTML page", fault.Rule{Kind: fault.HTML}, false, 502, 0},
		{"sent, then 500", fault.Rule{Kind: fault.Status, Apply: true}, false, 500, 1},
		{"sent, then dropped", fault.Rule{Kind: fault.Drop, Apply: true}, true, 0, 1},
		{"dropped before sending", fault.Rule{Kind: fault.Drop}, true, 0, 0},
		{"sent, answer truncated", fault.Rule{Kind: fault.Truncated, Apply: true}, true, 0, 1},
		{"exec error", fault.Rule{Kind: fault.ExecError}, false, 500, 0},
		{"slow after sending", fault.Rule{Kind: fault.Hang, Apply: true, Delay: fault.Duration(time.Millisecond)}, false, 200, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := mailpit.New(mailpit.Options{})
			hs := httptest.NewServer(srv)
			defer hs.Close()
			defer srv.Close()
			if err := srv.Faults().Add(c.rule); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(mail("faulty", "<f@connhost.test>"))
			resp, err := http.Post(hs.URL+"/api/v1/send", "application/json", bytes.NewReader(b))
			if err == nil {
				var buf bytes.Buffer
				_, err = buf.ReadFrom(resp.Body)
				resp.Body.Close()
				if c.wantErr && err == nil {
					t.Fatalf("no transport error: %d %s", resp.StatusCode, buf.String())
				}
				if !c.wantErr && resp.StatusCode != c.wantStatus {
					t.Fatalf("%d, want %d", resp.StatusCode, c.wantStatus)
				}
			} else if !c.wantErr {
				t.Fatal(err)
			}
			if n := len(srv.Messages()); n != c.wantMessages {
				t.Fatalf("%d messages, want %d", n, c.wantMessages)
			}
			if st := srv.Stats(); st.MessagesSent != c.wantMessages || st.FaultsInjected != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestHoldAndRelease(t *testing.T) {
	srv := mailpit.New(mailpit.Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()
	if err := srv.Faults().Add(fault.Rule{Kind: fault.Hold, Path: "/api/v1/send"}); err != nil {
		t.Fatal(err)
	}
	a := api{t: t, base: hs.URL}
	done := make(chan string)
	go func() {
		b, _ := json.Marshal(mail("held", ""))
		resp, err := http.Post(hs.URL+"/api/v1/send", "application/json", bytes.NewReader(b))
		if err != nil {
			done <- err.Error()
			return
		}
		resp.Body.Close()
		done <- resp.Status
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Faults().WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := a.list().Total; n != 0 {
		t.Fatalf("held send already stored: %d", n)
	}
	srv.Faults().Release()
	if got := <-done; got != "200 OK" {
		t.Fatalf("held send: %s", got)
	}
	if n := a.list().Total; n != 1 {
		t.Fatalf("%d messages", n)
	}
}

func TestControlAPI(t *testing.T) {
	srv := mailpit.New(mailpit.Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	a := api{t: t, base: hs.URL}
	if st, b := a.do("POST", "/_sandbox/faults", fault.Rule{Kind: fault.Status, Status: 503, Path: "/api/v1/search"}); st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	a.send(mail("x", ""))
	if st, _ := a.do("GET", "/api/v1/search?query=x", nil); st != 503 {
		t.Fatalf("search fault: %d", st)
	}
	st, b := a.do("GET", "/_sandbox/stats", nil)
	var stats mailpit.Stats
	if err := json.Unmarshal(b, &stats); err != nil || st != 200 || stats.MessagesSent != 1 || stats.FaultsInjected != 1 || stats.Requests != 2 {
		t.Fatalf("stats %d %s", st, b)
	}
	if st, _ := a.do("POST", "/_sandbox/reset", nil); st != 200 || a.list().Total != 0 {
		t.Fatal("reset")
	}
	if st, _ := a.do("GET", "/livez", nil); st != 200 {
		t.Fatal("livez")
	}
}
