package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/abi/guest/guesttest"
)

const (
	key1     = "ck_5b2e9f00aa11"
	sendJSON = `{"to":["jane@example.com","joe@example.com"],"subject":"Invoice 42","text":"Hello","html":"<p>Hello</p>"}`
)

func sendOp(h guest.Host, key, args string) abi.Outcome {
	return invoke(h, abi.ExportExecuteWithKey, "send", key, args)
}

func reconcileOp(h guest.Host, key string) abi.Outcome {
	return invoke(h, abi.ExportReconcile, "send", key, sendJSON)
}

// TestDescribe proves the module says what the manifest declares.
func TestDescribe(t *testing.T) {
	want := map[string]abi.OperationInfo{
		"send":            {Name: "send", ExecuteWithKey: true, Reconcile: true},
		"release_message": {Name: "release_message", Execute: true},
		"get_message":     {Name: "get_message", Execute: true},
		"search_messages": {Name: "search_messages", Execute: true},
	}
	d := guest.Describe()
	if d.ABI != abi.Version || len(d.Operations) != len(want) {
		t.Fatalf("describe = %+v", d)
	}
	for _, op := range d.Operations {
		if op != want[op.Name] {
			t.Errorf("operation %s = %+v, want %+v", op.Name, op, want[op.Name])
		}
	}
}

func TestMessageID(t *testing.T) {
	tests := []struct{ key, want string }{
		{"ck_5b2e9f00aa11", "ck_5b2e9f00aa11@connhost.invalid"},
		{"A-b_9", "A-b_9@connhost.invalid"},
		// Anything outside [A-Za-z0-9_-] is hashed: dots, colons, spaces…
		{"ns:payments/abc", "sha256."},
		{strings.Repeat("a", 129), "sha256."},
	}
	for _, tt := range tests {
		got := messageID(tt.key)
		if strings.HasPrefix(tt.want, "sha256.") {
			if !strings.HasPrefix(got, "sha256.") || len(got) != len("sha256.")+64+len("@connhost.invalid") {
				t.Errorf("messageID(%q) = %q, want a sha256 form", tt.key, got)
			}
			if got != messageID(tt.key) {
				t.Errorf("messageID(%q) is not deterministic", tt.key)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("messageID(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
	if tag := keyTag(key1); !strings.HasPrefix(tag, "connhost-") || tag != strings.ToLower(tag) || len(tag) != len("connhost-")+16 {
		t.Errorf("keyTag = %q", tag)
	}
}

func TestSendSuccess(t *testing.T) {
	f := newFakeMailpit(t)
	h := f.host()
	o := sendOp(h, key1, sendJSON)
	wantKind(t, o, abi.OutcomeOK, "")
	res := guesttest.Result[sendResult](t, o)
	if res.ID == "" || o.Receipt != res.ID || res.MessageID != key1+"@connhost.invalid" || res.AlreadySent {
		t.Fatalf("result %+v receipt %q", res, o.Receipt)
	}
	m := f.find(res.ID)
	if m == nil || m.MessageID != res.MessageID || len(m.To) != 2 || m.From.Address != defaultFrom ||
		m.Headers["X-Connhost-Execution-Id"] != "exec-0001" {
		t.Fatalf("stored %+v", m)
	}
	if len(m.Tags) != 2 || m.Tags[0] != "connhost" || m.Tags[1] != keyTag(key1) {
		t.Fatalf("tags %q", m.Tags)
	}
	// The request was: pre-check search, then send.
	if f.count("GET /api/v1/search") != 1 || f.count("POST /api/v1/send") != 1 {
		t.Fatalf("calls %v", f.calls)
	}
}

func TestSendArgs(t *testing.T) {
	tests := []struct {
		name, args, contains string
	}{
		{"key in args", `{"key":"x","to":"a@b.c","subject":"s","text":"t"}`, "unknown field"},
		{"idempotency_key in args", `{"idempotency_key":"x","to":"a@b.c","subject":"s","text":"t"}`, "unknown field"},
		{"no to", `{"subject":"s","text":"t"}`, "to needs"},
		{"bad to", `{"to":"not an address","subject":"s","text":"t"}`, "not an email address"},
		{"header injection", `{"to":"a@b.c","subject":"s\r\nBcc: x@y.z","text":"t"}`, "subject must be"},
		{"no body", `{"to":"a@b.c","subject":"s"}`, "text or html"},
		{"to is a number", `{"to":5,"subject":"s","text":"t"}`, "invalid arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeMailpit(t)
			h := f.host()
			wantKind(t, sendOp(h, key1, tt.args), abi.OutcomePermanent, tt.contains)
			if len(h.Sent()) != 0 {
				t.Fatal("a request was sent")
			}
		})
	}
	t.Run("to as a string and from", func(t *testing.T) {
		f := newFakeMailpit(t)
		o := sendOp(f.host(), key1, `{"to":"a@b.c","from":"ops@example.com","subject":"s","text":"t"}`)
		wantKind(t, o, abi.OutcomeOK, "")
		if m := f.find(o.Receipt); m.From.Address != "ops@example.com" || len(m.To) != 1 {
			t.Fatalf("stored %+v", m)
		}
	})
	t.Run("no key", func(t *testing.T) {
		f := newFakeMailpit(t)
		wantKind(t, sendOp(f.host(), "", sendJSON), abi.OutcomePermanent, "no idempotency key")
		wantKind(t, invoke(f.host(), abi.ExportExecute, "send", "", sendJSON), abi.OutcomePermanent, "does not implement")
	})
}

// TestSendRetryDoesNotDuplicate: a second attempt of the same execution
// finds the first attempt's message and sends nothing.
func TestSendRetryDoesNotDuplicate(t *testing.T) {
	f := newFakeMailpit(t)
	first := sendOp(f.host(), key1, sendJSON)
	second := sendOp(f.host(), key1, sendJSON)
	wantKind(t, second, abi.OutcomeOK, "")
	if r := guesttest.Result[sendResult](t, second); !r.AlreadySent || second.Receipt != first.Receipt {
		t.Fatalf("second %+v, first receipt %q", r, first.Receipt)
	}
	if n := f.numMessages(); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

// TestSubstringTrap: Mailpit's message-id filter is a substring match. A
// message whose Message-ID merely contains ours (or equals it in another
// case) is not ours: reconcile says not_applied and send really sends.
func TestSubstringTrap(t *testing.T) {
	f := newFakeMailpit(t)
	ours := messageID(key1)
	f.store("x"+ours, "contains ours")
	f.store(ours+".evil", "contains ours too")
	f.store(strings.ToUpper(ours), "ours in upper case")
	wantKind(t, reconcileOp(f.host(), key1), abi.OutcomeNotApplied, "no message")
	o := sendOp(f.host(), key1, sendJSON)
	wantKind(t, o, abi.OutcomeOK, "")
	if r := guesttest.Result[sendResult](t, o); r.AlreadySent {
		t.Fatal("a look-alike Message-ID counted as an earlier attempt")
	}
	rec := reconcileOp(f.host(), key1)
	wantKind(t, rec, abi.OutcomeApplied, "")
	if rec.Receipt != o.Receipt {
		t.Fatalf("reconcile receipt %q, want %q", rec.Receipt, o.Receipt)
	}
}

func TestReconcileSend(t *testing.T) {
	t.Run("applied", func(t *testing.T) {
		f := newFakeMailpit(t)
		o := sendOp(f.host(), key1, sendJSON)
		rec := reconcileOp(f.host(), key1)
		wantKind(t, rec, abi.OutcomeApplied, "")
		if rec.Receipt != o.Receipt || guesttest.Result[sendResult](t, rec).ID != o.Receipt {
			t.Fatalf("receipt %q, want %q", rec.Receipt, o.Receipt)
		}
	})
	t.Run("not applied", func(t *testing.T) {
		f := newFakeMailpit(t)
		sendOp(f.host(), key1+"-other", sendJSON)
		wantKind(t, reconcileOp(f.host(), key1), abi.OutcomeNotApplied, "")
	})
	t.Run("many look-alikes, ours on a later page", func(t *testing.T) {
		f := newFakeMailpit(t)
		o := sendOp(f.host(), key1, sendJSON) // oldest, so last in results
		for i := 0; i < 120; i++ {
			f.store(fmt.Sprintf("%d%s", i, messageID(key1)), "look-alike")
		}
		h := f.host()
		rec := reconcileOp(h, key1)
		wantKind(t, rec, abi.OutcomeApplied, "")
		if rec.Receipt != o.Receipt || len(h.Sent()) != 3 {
			t.Fatalf("receipt %q (want %q) after %d requests", rec.Receipt, o.Receipt, len(h.Sent()))
		}
	})
	unknown := []struct {
		name  string
		fault func(w http.ResponseWriter, r *http.Request) bool
	}{
		{"500", func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(500)
			fmt.Fprint(w, "internal error")
			return true
		}},
		{"html 502", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			fmt.Fprint(w, "<html>Bad Gateway</html>")
			return true
		}},
		{"garbage 200", func(w http.ResponseWriter, r *http.Request) bool {
			fmt.Fprint(w, `{"messages_count":3,"messages":[{"ID":`)
			return true
		}},
		{"200 without messages_count", func(w http.ResponseWriter, r *http.Request) bool {
			fmt.Fprint(w, `{"messages":[]}`)
			return true
		}},
	}
	for _, tt := range unknown {
		t.Run("unknown "+tt.name, func(t *testing.T) {
			f := newFakeMailpit(t)
			f.fault = tt.fault
			wantKind(t, reconcileOp(f.host(), key1), abi.OutcomeUnknown, "")
		})
	}
	t.Run("unknown unreachable", func(t *testing.T) {
		f := newFakeMailpit(t)
		h := f.host()
		f.srv.Close()
		wantKind(t, reconcileOp(h, key1), abi.OutcomeUnknown, "network")
	})
	t.Run("unknown denied", func(t *testing.T) {
		f := newFakeMailpit(t)
		h := f.host()
		h.Allow = []string{"http://127.0.0.1:8025"}
		wantKind(t, reconcileOp(h, key1), abi.OutcomeUnknown, "allowlist")
	})
}

// TestSendLostAnswer: Mailpit stored the message but the answer was lost.
// send looks before calling it failed.
func TestSendLostAnswer(t *testing.T) {
	t.Run("timeout after store", func(t *testing.T) {
		f := newFakeMailpit(t)
		release := make(chan struct{})
		f.afterStore = func() { <-release }
		h := f.host()
		h.Timeout = 200 * time.Millisecond
		o := sendOp(h, key1, sendJSON)
		close(release)
		wantKind(t, o, abi.OutcomeOK, "")
		if n := f.numMessages(); n != 1 {
			t.Fatalf("%d messages, want 1", n)
		}
	})
	t.Run("502 before store, then retry", func(t *testing.T) {
		f := newFakeMailpit(t)
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != "POST" {
				return false
			}
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			fmt.Fprint(w, "<html>Bad Gateway</html>")
			return true
		}
		// Not stored yet is not evidence of not sent: the request may still
		// be in flight, so the answer is uncertain (the host reconciles).
		wantKind(t, sendOp(f.host(), key1, sendJSON), abi.OutcomeUncertain, "no message with Message-ID")
		f.mu.Lock()
		f.fault = nil
		f.mu.Unlock()
		wantKind(t, sendOp(f.host(), key1, sendJSON), abi.OutcomeOK, "")
		if n := f.numMessages(); n != 1 {
			t.Fatalf("%d messages, want 1", n)
		}
	})
	t.Run("garbage 200 after store", func(t *testing.T) {
		f := newFakeMailpit(t)
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != "POST" {
				return false
			}
			f.send(httptest.NewRecorder(), r) // stored, answer discarded
			fmt.Fprint(w, `{"ID":`)
			return true
		}
		o := sendOp(f.host(), key1, sendJSON)
		wantKind(t, o, abi.OutcomeOK, "")
		if n := f.numMessages(); n != 1 || f.find(o.Receipt) == nil {
			t.Fatalf("%d messages, receipt %q", n, o.Receipt)
		}
	})
	t.Run("duplicate ignored by mailpit", func(t *testing.T) {
		// An earlier attempt lands between this attempt's pre-check and
		// its send; Mailpit runs with --ignore-duplicate-ids and answers
		// an empty ID. send reports the earlier message.
		f := newFakeMailpit(t)
		f.ignoreDup = true
		var earlier string
		f.beforeStore = func() {
			f.beforeStore = nil
			earlier = f.store(messageID(key1), "earlier attempt")
		}
		o := sendOp(f.host(), key1, sendJSON)
		wantKind(t, o, abi.OutcomeOK, "")
		if o.Receipt != earlier || f.numMessages() != 1 {
			t.Fatalf("receipt %q, want %q; %d messages", o.Receipt, earlier, f.numMessages())
		}
	})
	t.Run("mangled response envelope", func(t *testing.T) {
		// The SDK reports a response envelope that does not decode as
		// HTTPInvalid although the send was performed: send looks.
		f := newFakeMailpit(t)
		o := sendOp(&mangleSends{testHost: f.host()}, key1, sendJSON)
		wantKind(t, o, abi.OutcomeOK, "")
		if f.numMessages() != 1 || f.find(o.Receipt) == nil {
			t.Fatalf("%d messages, receipt %q", f.numMessages(), o.Receipt)
		}
	})
	t.Run("pre-check fails", func(t *testing.T) {
		f := newFakeMailpit(t)
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(503)
			return true
		}
		wantKind(t, sendOp(f.host(), key1, sendJSON), abi.OutcomeRetryable, "nothing sent")
		if f.count("POST /api/v1/send") != 0 {
			t.Fatal("sent although the pre-check failed")
		}
	})
}

func TestSendFailures(t *testing.T) {
	t.Run("rejected by mailpit", func(t *testing.T) {
		f := newFakeMailpit(t)
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != "POST" {
				return false
			}
			jsonError(w, "invalid To address: jane@")
			return true
		}
		h := f.host()
		wantKind(t, sendOp(h, key1, sendJSON), abi.OutcomePermanent, "invalid To address")
		if f.count("GET /api/v1/search") != 1 {
			t.Fatalf("a rejected send should not be looked up again: %v", f.calls)
		}
	})
	t.Run("denied", func(t *testing.T) {
		f := newFakeMailpit(t)
		h := f.host()
		h.Allow = []string{"http://127.0.0.1:8025"}
		o := sendOp(h, key1, sendJSON)
		// The pre-check is denied first: nothing was sent.
		wantKind(t, o, abi.OutcomePermanent, "allowlist")
		if f.count("POST /api/v1/send") != 0 {
			t.Fatal("denied request reached the provider")
		}
	})
	t.Run("too large", func(t *testing.T) {
		f := newFakeMailpit(t)
		h := f.host()
		h.MaxBody = 8
		wantKind(t, sendOp(h, key1, sendJSON), abi.OutcomeRetryable, "too_large")
	})
	t.Run("not found", func(t *testing.T) {
		f := newFakeMailpit(t)
		h := f.host()
		h.Values["base_url"] = f.srv.URL + "/wrong-webroot"
		wantKind(t, sendOp(h, key1, sendJSON), abi.OutcomePermanent, "404")
	})
}

func TestReleaseMessage(t *testing.T) {
	release := func(h guest.Host, args string) abi.Outcome {
		return invoke(h, abi.ExportExecute, "release_message", "", args)
	}
	t.Run("ok", func(t *testing.T) {
		f := newFakeMailpit(t)
		id := f.store("m1@example.com", "hello")
		o := release(f.host(), `{"id":"`+id+`","to":["ext@example.com"]}`)
		wantKind(t, o, abi.OutcomeOK, "")
		if len(f.relays) != 1 || f.relays[0][0] != "ext@example.com" {
			t.Fatalf("relays %v", f.relays)
		}
	})
	t.Run("rejected", func(t *testing.T) {
		f := newFakeMailpit(t)
		wantKind(t, release(f.host(), `{"id":"MP9999","to":"ext@example.com"}`), abi.OutcomePermanent, "404")
		wantKind(t, release(f.host(), `{"id":"../send","to":"ext@example.com"}`), abi.OutcomePermanent, "invalid arguments")
	})
	t.Run("uncertain", func(t *testing.T) {
		f := newFakeMailpit(t)
		id := f.store("m1@example.com", "hello")
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			time.Sleep(300 * time.Millisecond)
			return false
		}
		h := f.host()
		h.Timeout = 100 * time.Millisecond
		wantKind(t, release(h, `{"id":"`+id+`","to":"ext@example.com"}`), abi.OutcomeUncertain, "outcome uncertain")
		if logs := h.ErrorLogs(); len(logs) != 1 {
			t.Fatalf("error logs %q", logs)
		}
	})
}

func TestReads(t *testing.T) {
	f := newFakeMailpit(t)
	sent := sendOp(f.host(), key1, sendJSON)
	get := func(h guest.Host, id string) abi.Outcome {
		return invoke(h, abi.ExportExecute, "get_message", "", `{"id":"`+id+`"}`)
	}
	o := get(f.host(), sent.Receipt)
	wantKind(t, o, abi.OutcomeOK, "")
	v := guesttest.Result[messageView](t, o)
	if v.ID != sent.Receipt || v.Subject != "Invoice 42" || v.Text != "Hello" || v.MessageID != messageID(key1) {
		t.Fatalf("view %+v", v)
	}
	wantKind(t, get(f.host(), "MP9999"), abi.OutcomePermanent, "404 page not found")
	wantKind(t, get(f.host(), "a/b"), abi.OutcomePermanent, "invalid arguments")

	s := invoke(f.host(), abi.ExportExecute, "search_messages", "", `{"query":"invoice","limit":5}`)
	wantKind(t, s, abi.OutcomeOK, "")
	var res struct {
		Total    int `json:"total"`
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(s.Result, &res); err != nil || res.Total != 1 || res.Messages[0].ID != sent.Receipt {
		t.Fatalf("search %s (%v)", s.Result, err)
	}
	wantKind(t, invoke(f.host(), abi.ExportExecute, "search_messages", "", `{"query":""}`), abi.OutcomePermanent, "invalid arguments")

	f.fault = func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(503)
		return true
	}
	wantKind(t, get(f.host(), sent.Receipt), abi.OutcomeRetryable, "503")
	wantKind(t, invoke(f.host(), abi.ExportExecute, "search_messages", "", `{"query":"x"}`), abi.OutcomeRetryable, "503")
}

// mangleSends answers HTTPInvalid to POSTs after performing them.
type mangleSends struct{ *testHost }

func (m *mangleSends) HTTP(req abi.HTTPRequest) abi.HTTPResponse {
	resp := m.testHost.HTTP(req)
	if req.Method == "POST" && resp.Err == abi.HTTPOK {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: "abi: decode http response: truncated"}
	}
	return resp
}
