package mailpit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/mailpit"
	"github.com/connhost/connhost/devkit/testing/testenv"
)

// The contract: one suite of cases, run against the emulator and against
// the real Mailpit (the version pinned in tools/mailpit). A case that
// passes on one and fails on the other is an emulator bug (or a Mailpit
// upgrade that changed behaviour the connector relies on).

type api struct {
	t    *testing.T
	base string
}

func (a api) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (a api) send(req mailpit.SendRequest) string {
	a.t.Helper()
	st, b := a.do("POST", "/api/v1/send", req)
	if st != 200 {
		a.t.Fatalf("send: %d %s", st, b)
	}
	var res mailpit.SendResponse
	mustJSON(a.t, b, &res)
	if res.ID == "" {
		a.t.Fatalf("send returned no ID: %s", b)
	}
	return res.ID
}

func (a api) search(q string) mailpit.MessagesSummary {
	a.t.Helper()
	st, b := a.do("GET", "/api/v1/search?query="+url.QueryEscape(q), nil)
	if st != 200 {
		a.t.Fatalf("search %q: %d %s", q, st, b)
	}
	var res mailpit.MessagesSummary
	mustJSON(a.t, b, &res)
	return res
}

func (a api) list() mailpit.MessagesSummary {
	a.t.Helper()
	st, b := a.do("GET", "/api/v1/messages", nil)
	if st != 200 {
		a.t.Fatalf("list: %d %s", st, b)
	}
	var res mailpit.MessagesSummary
	mustJSON(a.t, b, &res)
	return res
}

func (a api) message(id string) mailpit.Message {
	a.t.Helper()
	st, b := a.do("GET", "/api/v1/message/"+id, nil)
	if st != 200 {
		a.t.Fatalf("message %s: %d %s", id, st, b)
	}
	var m mailpit.Message
	mustJSON(a.t, b, &m)
	return m
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
}

func mail(subject, messageID string, tags ...string) mailpit.SendRequest {
	r := mailpit.SendRequest{
		From:    mailpit.SendAddress{Email: "agent@connhost.test", Name: "connhost"},
		To:      []mailpit.SendAddress{{Email: "user@example.com", Name: "User"}},
		Subject: subject,
		Text:    "body of " + subject,
		Tags:    tags,
	}
	if messageID != "" {
		r.Headers = map[string]string{"Message-ID": messageID}
	}
	return r
}

func ids(s mailpit.MessagesSummary) []string {
	var out []string
	for _, m := range s.Messages {
		out = append(out, m.ID)
	}
	return out
}

var contractCases = []struct {
	name string
	run  func(t *testing.T, a api)
}{
	{"custom Message-ID and tags are stored", func(t *testing.T, a api) {
		id := a.send(mail("Invoice 42", "<exec-1@connhost.test>", "connhost", "Exec Tag"))
		m := a.message(id)
		if m.ID != id || m.MessageID != "exec-1@connhost.test" {
			t.Fatalf("ID %q MessageID %q; want %q and the Message-ID without brackets", m.ID, m.MessageID, id)
		}
		if m.Subject != "Invoice 42" || m.Text != "body of Invoice 42" {
			t.Fatalf("subject %q text %q", m.Subject, m.Text)
		}
		if m.From == nil || m.From.Address != "agent@connhost.test" || m.From.Name != "connhost" {
			t.Fatalf("From %+v", m.From)
		}
		if len(m.To) != 1 || m.To[0].Address != "user@example.com" || m.To[0].Name != "User" {
			t.Fatalf("To %+v", m.To)
		}
		if !slices.Equal(m.Tags, []string{"connhost", "Exec Tag"}) {
			t.Fatalf("Tags %q, want [connhost Exec Tag] (sorted ignoring case)", m.Tags)
		}
		if m.ReturnPath != "agent@connhost.test" {
			t.Fatalf("ReturnPath %q", m.ReturnPath)
		}
	}},
	{"Message-ID header key is case-insensitive and brackets are optional", func(t *testing.T, a api) {
		r := mail("lower", "")
		r.Headers = map[string]string{"message-id": "exec-2@connhost.test"}
		id := a.send(r)
		if got := a.message(id).MessageID; got != "exec-2@connhost.test" {
			t.Fatalf("MessageID %q", got)
		}
	}},
	{"without a Message-ID Mailpit generates one", func(t *testing.T, a api) {
		id := a.send(mail("no id", ""))
		if got := a.message(id).MessageID; !strings.HasSuffix(got, "@mailpit") || len(got) <= len("@mailpit") {
			t.Fatalf("generated MessageID %q, want <random>@mailpit", got)
		}
	}},
	{"no idempotency: two sends are two messages", func(t *testing.T, a api) {
		first := a.send(mail("same", "<dup@connhost.test>"))
		second := a.send(mail("same", "<dup@connhost.test>"))
		if first == second {
			t.Fatalf("two sends returned one ID %q", first)
		}
		l := a.list()
		if l.Total != 2 || l.MessagesCount != 2 || len(l.Messages) != 2 {
			t.Fatalf("total %d messages_count %d len %d, want 2", l.Total, l.MessagesCount, len(l.Messages))
		}
		if !slices.Equal(ids(l), []string{second, first}) {
			t.Fatalf("list order %q, want newest first [%s %s]", ids(l), second, first)
		}
		s := a.search("message-id:dup@connhost.test")
		if s.MessagesCount != 2 {
			t.Fatalf("search found %d, want both duplicates", s.MessagesCount)
		}
	}},
	{"message-id search is a case-insensitive substring match", func(t *testing.T, a api) {
		short := a.send(mail("short", "<exec-123@connhost.test>"))
		long := a.send(mail("long", "<exec-1234@connhost.test>"))
		cases := []struct {
			q    string
			want []string
		}{
			{"message-id:exec-123", []string{long, short}},                     // a prefix matches both
			{"message-id:exec-123@connhost.test", []string{short}},             // the full id is not a substring of the other
			{"message-id:123@connhost", []string{short}},                       // any substring
			{"message-id:EXEC-123@CONNHOST.TEST", []string{short}},             // case-insensitive
			{"message-id:<exec-123@connhost.test>", []string{short}},           // brackets are ignored
			{`message-id:"exec-1234@connhost.test"`, []string{long}},           // quotes are removed
			{"message-id:exec-9", nil},                                         // no match
			{"message-id:exec-123 subject:long", []string{long}},               // terms are ANDed
			{"-message-id:exec-1234@connhost.test subject:o", []string{short}}, // negation
		}
		for _, c := range cases {
			if got := ids(a.search(c.q)); !slices.Equal(got, c.want) {
				t.Errorf("search %q = %q, want %q", c.q, got, c.want)
			}
		}
	}},
	{"tag search is exact (case-insensitive)", func(t *testing.T, a api) {
		one := a.send(mail("one", "", "connhost"))
		two := a.send(mail("two", "", "connhost-exec"))
		cases := []struct {
			q    string
			want []string
		}{
			{"tag:connhost", []string{one}},
			{"tag:CONNHOST", []string{one}},
			{"tag:connhost-exec", []string{two}},
			{"tag:conn", nil},
			{"-tag:connhost", []string{two}},
		}
		for _, c := range cases {
			if got := ids(a.search(c.q)); !slices.Equal(got, c.want) {
				t.Errorf("search %q = %q, want %q", c.q, got, c.want)
			}
		}
	}},
	{"plain words search subject, addresses and body", func(t *testing.T, a api) {
		r := mail("Quarterly report", "")
		r.To = []mailpit.SendAddress{{Email: "cfo@example.com"}}
		id := a.send(r)
		_ = a.send(mail("other", ""))
		for _, q := range []string{"quarterly", "REPORT", "body of quarterly", "cfo@example.com", "to:cfo", "subject:quarterly"} {
			if got := ids(a.search(q)); !slices.Equal(got, []string{id}) {
				t.Errorf("search %q = %q, want [%s]", q, got, id)
			}
		}
	}},
	{"search answer has the documented shape", func(t *testing.T, a api) {
		id := a.send(mail("shape", "<shape@connhost.test>", "t1"))
		_ = a.send(mail("other", ""))
		st, b := a.do("GET", "/api/v1/search?query="+url.QueryEscape("message-id:shape@connhost.test"), nil)
		if st != 200 {
			t.Fatalf("%d %s", st, b)
		}
		var raw map[string]json.RawMessage
		mustJSON(t, b, &raw)
		for _, k := range []string{"total", "unread", "count", "messages_count", "messages_unread", "start", "tags", "messages"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("search answer lacks %q: %s", k, b)
			}
		}
		var msgs []map[string]json.RawMessage
		mustJSON(t, raw["messages"], &msgs)
		if len(msgs) != 1 {
			t.Fatalf("%d messages", len(msgs))
		}
		for _, k := range []string{"ID", "MessageID", "Read", "From", "To", "Cc", "Bcc", "ReplyTo", "Subject", "Created", "Username", "Tags", "Size", "Attachments", "Snippet"} {
			if _, ok := msgs[0][k]; !ok {
				t.Errorf("message summary lacks %q", k)
			}
		}
		s := a.search("message-id:shape@connhost.test")
		m := s.Messages[0]
		if s.Total != 2 || s.MessagesCount != 1 || s.Count != 1 || m.ID != id || m.MessageID != "shape@connhost.test" ||
			!slices.Equal(m.Tags, []string{"t1"}) || m.Read || m.Size == 0 || m.Created.IsZero() || m.Snippet != "body of shape" {
			t.Fatalf("summary %+v / message %+v", s, m)
		}
		if !slices.Equal(s.Tags, []string{"t1"}) {
			t.Fatalf("mailbox tags %q", s.Tags)
		}
	}},
	{"reading a message marks it read", func(t *testing.T, a api) {
		id := a.send(mail("read me", ""))
		if l := a.list(); l.Unread != 1 || l.Messages[0].Read {
			t.Fatalf("before: unread %d", l.Unread)
		}
		a.message(id)
		if l := a.list(); l.Unread != 0 || !l.Messages[0].Read {
			t.Fatalf("after: unread %d", l.Unread)
		}
		if got := ids(a.search("is:read")); !slices.Equal(got, []string{id}) {
			t.Fatalf("is:read = %q", got)
		}
	}},
	{"plus addresses become tags", func(t *testing.T, a api) {
		r := mail("plus", "")
		r.To = []mailpit.SendAddress{{Email: "user+promo@example.com"}}
		id := a.send(r)
		if got := a.message(id).Tags; !slices.Equal(got, []string{"promo"}) {
			t.Fatalf("Tags %q", got)
		}
	}},
	{"latest is the newest message", func(t *testing.T, a api) {
		a.send(mail("old", ""))
		id := a.send(mail("new", ""))
		if got := a.message("latest").ID; got != id {
			t.Fatalf("latest = %s, want %s", got, id)
		}
	}},
	{"a tag keeps the casing it was first stored with", func(t *testing.T, a api) {
		a.send(mail("first", "", "Conn-Host"))
		id := a.send(mail("second", "", "conn-host", "conn-host", "bad,tag"))
		if got := a.message(id).Tags; !slices.Equal(got, []string{"bad", "Conn-Host", "tag"}) {
			t.Fatalf("Tags %q", got)
		}
		if got := a.list().Tags; !slices.Equal(got, []string{"bad", "Conn-Host", "tag"}) {
			t.Fatalf("mailbox tags %q", got)
		}
	}},
	{"Bcc alone is a recipient and HTML-only mail has a snippet", func(t *testing.T, a api) {
		r := mail("bcc", "")
		r.To = nil
		r.Text = ""
		r.HTML = "<p>Hello <b>there</b></p>"
		r.Bcc = []string{"hidden@example.com"}
		r.Cc = []mailpit.SendAddress{{Email: "copy@example.com", Name: "Copy"}}
		id := a.send(r)
		m := a.message(id)
		if len(m.Bcc) != 1 || m.Bcc[0].Address != "hidden@example.com" || len(m.Cc) != 1 || m.Cc[0].Name != "Copy" || len(m.To) != 0 {
			t.Fatalf("recipients To %+v Cc %+v Bcc %+v", m.To, m.Cc, m.Bcc)
		}
		if m.HTML != "<p>Hello <b>there</b></p>" {
			t.Fatalf("HTML %q", m.HTML)
		}
		if s := a.search("bcc:hidden"); len(s.Messages) != 1 || s.Messages[0].Snippet != "Hello there" {
			t.Fatalf("bcc search / snippet: %+v", s.Messages)
		}
	}},
	{"delete all empties the mailbox", func(t *testing.T, a api) {
		a.send(mail("gone", ""))
		if st, b := a.do("DELETE", "/api/v1/messages", nil); st != 200 || string(b) != "ok" {
			t.Fatalf("delete: %d %q", st, b)
		}
		if l := a.list(); l.Total != 0 || len(l.Messages) != 0 {
			t.Fatalf("after delete total %d", l.Total)
		}
	}},
	{"delete by IDs keeps the others", func(t *testing.T, a api) {
		gone := a.send(mail("gone", ""))
		kept := a.send(mail("kept", ""))
		if st, b := a.do("DELETE", "/api/v1/messages", map[string][]string{"IDs": {gone}}); st != 200 {
			t.Fatalf("delete: %d %s", st, b)
		}
		if got := ids(a.list()); !slices.Equal(got, []string{kept}) {
			t.Fatalf("left %q", got)
		}
	}},
}

// Failure answers: the connector branches on these.
var contractErrorCases = []struct {
	name       string
	method     string
	path       string
	body       any
	wantStatus int
	wantBody   string // substring
}{
	{"invalid To address", "POST", "/api/v1/send", mailpit.SendRequest{From: mailpit.SendAddress{Email: "a@connhost.test"}, To: []mailpit.SendAddress{{Email: "bad"}}}, 400, `{"Error":"invalid To address: bad"}`},
	{"restricted header", "POST", "/api/v1/send", mailpit.SendRequest{From: mailpit.SendAddress{Email: "a@connhost.test"}, To: []mailpit.SendAddress{{Email: "b@example.com"}}, Headers: map[string]string{"Subject": "x"}}, 400, `{"Error":"cannot overwrite header: \"Subject\""}`},
	{"X-Tags with Tags", "POST", "/api/v1/send", mailpit.SendRequest{From: mailpit.SendAddress{Email: "a@connhost.test"}, To: []mailpit.SendAddress{{Email: "b@example.com"}}, Tags: []string{"t"}, Headers: map[string]string{"X-Tags": "x"}}, 400, `cannot overwrite header: \"X-Tags\"`},
	{"no from", "POST", "/api/v1/send", mailpit.SendRequest{To: []mailpit.SendAddress{{Email: "b@example.com"}}}, 400, `{"Error":"error building message: from not set"}`},
	{"no recipients", "POST", "/api/v1/send", mailpit.SendRequest{From: mailpit.SendAddress{Email: "a@connhost.test"}}, 400, `{"Error":"error building message: no recipients (to, cc, bcc) set"}`},
	{"not JSON", "POST", "/api/v1/send", json.RawMessage(`1`), 400, `"Error":`},
	{"empty search", "GET", "/api/v1/search?query=", nil, 400, "Error: no search query"},
	{"unknown message", "GET", "/api/v1/message/doesnotexist", nil, 404, "404 page not found"},
}

func targets(t *testing.T) map[string]string {
	emu := httptest.NewServer(mailpit.New(mailpit.Options{}))
	t.Cleanup(emu.Close)
	return map[string]string{
		"emulator": emu.URL,
		"mailpit":  testenv.Mailpit(t),
	}
}

func TestContract(t *testing.T) {
	for name, base := range targets(t) {
		t.Run(name, func(t *testing.T) {
			for _, c := range contractCases {
				t.Run(c.name, func(t *testing.T) {
					a := api{t: t, base: base}
					if st, b := a.do("DELETE", "/api/v1/messages", nil); st != 200 {
						t.Fatalf("reset: %d %s", st, b)
					}
					c.run(t, a)
				})
			}
			for _, c := range contractErrorCases {
				t.Run("error/"+c.name, func(t *testing.T) {
					a := api{t: t, base: base}
					before := a.list().Total
					st, b := a.do(c.method, c.path, c.body)
					if st != c.wantStatus || !strings.Contains(string(b), c.wantBody) {
						t.Fatalf("%s %s = %d %s, want %d containing %s", c.method, c.path, st, b, c.wantStatus, c.wantBody)
					}
					if after := a.list().Total; after != before {
						t.Fatalf("a failed request stored a message (%d → %d)", before, after)
					}
				})
			}
		})
	}
}

// With --ignore-duplicate-ids a send whose custom Message-ID is already
// stored is dropped and answered 200 with an empty ID; the comparison is
// exact (case-sensitive), and mail without a Message-ID is never a
// duplicate.
func TestContractIgnoreDuplicateIDs(t *testing.T) {
	emu := httptest.NewServer(mailpit.New(mailpit.Options{IgnoreDuplicateIDs: true}))
	t.Cleanup(emu.Close)
	for name, base := range map[string]string{
		"emulator": emu.URL,
		"mailpit":  testenv.Mailpit(t, "--ignore-duplicate-ids"),
	} {
		t.Run(name, func(t *testing.T) {
			a := api{t: t, base: base}
			first := a.send(mail("one", "<dup@connhost.test>"))
			sendRaw := func(r mailpit.SendRequest) string {
				st, b := a.do("POST", "/api/v1/send", r)
				var res mailpit.SendResponse
				if st != 200 {
					t.Fatalf("send: %d %s", st, b)
				}
				mustJSON(t, b, &res)
				return res.ID
			}
			if id := sendRaw(mail("two", "dup@connhost.test")); id != "" {
				t.Fatalf("duplicate stored as %s", id)
			}
			if id := sendRaw(mail("case", "<DUP@connhost.test>")); id == "" {
				t.Fatal("a Message-ID differing in case was dropped")
			}
			for range 2 {
				if a.send(mail("no id", "")) == "" {
					t.Fatal("mail without Message-ID dropped")
				}
			}
			l := a.list()
			if l.Total != 4 {
				t.Fatalf("total %d, want 4", l.Total)
			}
			if got := ids(a.search("message-id:dup@connhost.test")); len(got) != 2 || got[1] != first {
				t.Fatalf("search %q", got)
			}
		})
	}
}

// mailpitRelayingToSelf starts a real Mailpit whose SMTP relay is its own
// SMTP server, so that a released message comes back as a new message.
func mailpitRelayingToSelf(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	relay := filepath.Join(t.TempDir(), "relay.yml")
	if err := os.WriteFile(relay, fmt.Appendf(nil, "host: 127.0.0.1\nport: %d\n", port), 0o644); err != nil {
		t.Fatal(err)
	}
	return testenv.Mailpit(t, "--smtp", fmt.Sprintf("127.0.0.1:%d", port), "--smtp-relay-config", relay)
}

// TestContractRelease: POST /api/v1/message/{ID}/release as Mailpit
// answers it, with an SMTP relay (its own SMTP server: the released copy
// is stored again) and without one (every release fails with an SMTP
// error, after the same checks of the message, the body and the
// addresses).
func TestContractRelease(t *testing.T) {
	relaying := httptest.NewServer(mailpit.New(mailpit.Options{RelayToSelf: true}))
	t.Cleanup(relaying.Close)
	plain := httptest.NewServer(mailpit.New(mailpit.Options{}))
	t.Cleanup(plain.Close)
	failures := []struct {
		name       string
		path       string
		body       string
		wantStatus int
		wantBody   string
	}{
		{"unknown message", "/api/v1/message/doesnotexist/release", `{"To":["c@example.com"]}`, 404, "404 page not found"},
		{"not JSON", "/api/v1/message/{id}/release", `xx`, 400, "invalid character 'x' looking for beginning of value"},
		{"To not a list", "/api/v1/message/{id}/release", `{"To":"c@example.com"}`, 400, "json: cannot unmarshal string into Go struct field .To of type []string"},
		{"no recipients", "/api/v1/message/{id}/release", `{"To":[]}`, 400, "No valid addresses found"},
		{"no To at all", "/api/v1/message/{id}/release", `{}`, 400, "No valid addresses found"},
		{"invalid address", "/api/v1/message/{id}/release", `{"To":["c@example.com","not an address"]}`, 400, "Invalid email address: not an address"},
	}
	for name, tc := range map[string]struct {
		base  string
		relay bool
	}{
		"emulator relaying": {relaying.URL, true},
		"mailpit relaying":  {mailpitRelayingToSelf(t), true},
		"emulator":          {plain.URL, false},
		"mailpit":           {testenv.Mailpit(t), false},
	} {
		t.Run(name, func(t *testing.T) {
			a := api{t: t, base: tc.base}
			r := mail("Quarterly", "<orig@connhost.test>", "connhost")
			r.Bcc = []string{"hidden@example.com"}
			id := a.send(r)
			for _, f := range failures {
				st, b := a.rawPost(strings.Replace(f.path, "{id}", id, 1), f.body)
				if st != f.wantStatus || !strings.Contains(string(b), f.wantBody) {
					t.Errorf("%s: %d %q, want %d containing %q", f.name, st, b, f.wantStatus, f.wantBody)
				}
			}
			if n := a.list().Total; n != 1 {
				t.Fatalf("a refused release stored something: %d messages", n)
			}
			st, b := a.rawPost("/api/v1/message/"+id+"/release", `{"To":["ext@example.com","user@example.com"]}`)
			if !tc.relay {
				if st != 400 || !strings.HasPrefix(string(b), "SMTP error: ") {
					t.Fatalf("release without a relay: %d %q, want 400 SMTP error", st, b)
				}
				if n := a.list().Total; n != 1 {
					t.Fatalf("%d messages after a failed release", n)
				}
				return
			}
			if st != 200 || string(b) != "ok" {
				t.Fatalf("release: %d %q", st, b)
			}
			var l mailpit.MessagesSummary
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				// The relay delivers over SMTP: the copy arrives a moment later.
				if l = a.list(); l.Total == 2 || time.Now().After(deadline) {
					break
				}
			}
			if l.Total != 2 {
				t.Fatalf("%d messages after the release, want the original and its relayed copy", l.Total)
			}
			cp := a.message(l.Messages[0].ID)
			if cp.ID == id || cp.MessageID == "orig@connhost.test" || !strings.HasSuffix(cp.MessageID, "@mailpit") {
				t.Errorf("copy ID %q MessageID %q: want a new ID and a generated Message-ID", cp.ID, cp.MessageID)
			}
			if cp.Subject != "Quarterly" || cp.Text != "body of Quarterly\r\n" || cp.From == nil || cp.From.Address != "agent@connhost.test" {
				t.Errorf("copy subject %q text %q from %+v", cp.Subject, cp.Text, cp.From)
			}
			if len(cp.To) != 1 || cp.To[0].Address != "user@example.com" {
				t.Errorf("copy To %+v: want the original's", cp.To)
			}
			var bcc []string
			for _, a := range cp.Bcc {
				bcc = append(bcc, a.Address)
			}
			if !slices.Equal(bcc, []string{"ext@example.com"}) {
				t.Errorf("copy Bcc %q: want the release's recipients no header names (and not the original's Bcc)", bcc)
			}
			if !slices.Equal(cp.Tags, []string{"connhost"}) {
				t.Errorf("copy tags %q", cp.Tags)
			}
			if got := a.message(id); got.MessageID != "orig@connhost.test" {
				t.Errorf("the original changed: %+v", got)
			}
			// A text and HTML message: the text's lines end in CRLF.
			r2 := mail("both", "")
			r2.Text, r2.HTML = "line 1\nline 2", "<p>html</p>"
			both := a.send(r2)
			if st, b := a.rawPost("/api/v1/message/"+both+"/release", `{"To":["ext@example.com"]}`); st != 200 {
				t.Fatalf("release: %d %s", st, b)
			}
			for deadline := time.Now().Add(10 * time.Second); a.list().Total < 4 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			if cp := a.message("latest"); cp.Subject != "both" || cp.Text != "line 1\r\nline 2" || cp.HTML != "<p>html</p>" {
				t.Errorf("copy of a text and HTML message: subject %q text %q html %q", cp.Subject, cp.Text, cp.HTML)
			}
			// "latest" names the newest message, the copy.
			if st, b := a.rawPost("/api/v1/message/latest/release", `{"To":["x@example.com"]}`); st != 200 {
				t.Errorf("release latest: %d %s", st, b)
			}
			// A display name is no SMTP recipient: the relay refuses it.
			if st, b := a.rawPost("/api/v1/message/"+id+"/release", `{"To":["X <x@example.com>"]}`); st != 400 || !strings.HasPrefix(string(b), "SMTP error: ") {
				t.Errorf("release to a named address: %d %q", st, b)
			}
		})
	}
}

func (a api) rawPost(path, body string) (int, []byte) {
	a.t.Helper()
	resp, err := http.Post(a.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, b
}
