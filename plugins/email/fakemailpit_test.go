package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeMailpit is a test double of the Mailpit v1.33 API subset the connector
// uses, following Mailpit's source (server/apiv1/send.go,
// internal/storage/search.go): no idempotency, a custom Message-ID taken
// from Headers and stored without angle brackets, "message-id:" search as a
// case-insensitive substring match, errors as 400 {"Error": "..."} or plain
// text, 404 as text/plain.
type fakeMailpit struct {
	t   *testing.T
	srv *httptest.Server

	mu          sync.Mutex
	n           int
	msgs        []*fakeMsg // oldest first
	relays      [][]string
	ignoreDup   bool // --ignore-duplicate-ids
	fault       func(w http.ResponseWriter, r *http.Request) bool
	beforeStore func() // runs before a send stores, without the lock
	afterStore  func() // runs after a send stored, before answering
	calls       map[string]int
}

type fakeMsg struct {
	ID, MessageID, Subject, Text string
	From                         mpAddress
	To                           []mpAddress
	Tags                         []string
	Headers                      map[string]string
}

// mpAddress is Mailpit's address JSON: {"Name": …, "Address": …}.
type mpAddress struct{ Name, Address string }

func newFakeMailpit(t *testing.T) *fakeMailpit {
	f := &fakeMailpit{t: t, calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeMailpit) host() *testHost {
	return newTestHost(f.srv.URL, map[string]string{"base_url": f.srv.URL, "default_from": "", "basic_auth": ""})
}

// store adds a message directly, as if sent by someone else.
func (f *fakeMailpit) store(messageID, subject string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("MP%04d", f.n)
	f.msgs = append(f.msgs, &fakeMsg{ID: id, MessageID: messageID, Subject: subject})
	return id
}

func (f *fakeMailpit) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

func (f *fakeMailpit) numMessages() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.msgs)
}

func jsonError(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(400)
	_ = json.NewEncoder(w).Encode(struct{ Error string }{msg})
}

func (f *fakeMailpit) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	route := r.Method + " " + r.URL.Path
	if strings.HasPrefix(r.URL.Path, "/api/v1/message/") {
		route = r.Method + " /api/v1/message/"
		if strings.HasSuffix(r.URL.Path, "/release") {
			route += "release"
		}
	}
	f.calls[route]++
	fault := f.fault
	f.mu.Unlock()
	if fault != nil && fault(w, r) {
		return
	}
	switch route {
	case "POST /api/v1/send":
		f.send(w, r)
	case "GET /api/v1/search":
		f.search(w, r)
	case "GET /api/v1/message/":
		f.get(w, r)
	case "POST /api/v1/message/release":
		f.release(w, r)
	default:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(404)
		fmt.Fprint(w, "404 page not found")
	}
}

func (f *fakeMailpit) send(w http.ResponseWriter, r *http.Request) {
	var body struct {
		From    struct{ Name, Email string }
		To      []struct{ Name, Email string }
		Cc      []struct{ Name, Email string }
		Subject string
		Text    string
		HTML    string
		Tags    []string
		Headers map[string]string
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		jsonError(w, err.Error())
		return
	}
	if body.From.Email == "" {
		jsonError(w, "error building message: from not set")
		return
	}
	var to []mpAddress
	for _, a := range body.To {
		if !strings.Contains(a.Email, "@") {
			jsonError(w, "invalid To address: "+a.Email)
			return
		}
		to = append(to, mpAddress{Name: a.Name, Address: a.Email})
	}
	var msgID string
	for k, v := range body.Headers {
		switch strings.ToLower(k) {
		case "to", "from", "cc", "bcc", "reply-to", "date", "subject", "content-type", "mime-version", "x-tags":
			jsonError(w, fmt.Sprintf("cannot overwrite header: %q", k))
			return
		case "message-id":
			msgID = strings.Trim(v, "<>")
		}
	}
	if before := f.beforeStore; before != nil {
		before()
	}
	f.mu.Lock()
	f.n++
	id := fmt.Sprintf("MP%04d", f.n)
	if msgID == "" {
		msgID = id + "@mailpit"
	} else if f.ignoreDup {
		for _, m := range f.msgs {
			if m.MessageID == msgID {
				f.mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(struct{ ID string }{""})
				return
			}
		}
	}
	f.msgs = append(f.msgs, &fakeMsg{ID: id, MessageID: msgID, Subject: body.Subject, Text: body.Text,
		From: mpAddress{Address: body.From.Email}, To: to, Tags: body.Tags, Headers: body.Headers})
	after := f.afterStore
	f.mu.Unlock()
	if after != nil {
		after()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct{ ID string }{id})
}

func (f *fakeMailpit) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("query"))
	if q == "" {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(400)
		fmt.Fprint(w, "Error: no search query")
		return
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("start"))
	limit := 50
	if l, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && l > -1 {
		limit = l
	}
	term := strings.ToLower(q)
	f.mu.Lock()
	var all []map[string]any
	for i := len(f.msgs) - 1; i >= 0; i-- { // newest first
		m := f.msgs[i]
		var ok bool
		switch {
		case strings.HasPrefix(term, "message-id:"):
			ok = strings.Contains(strings.ToLower(m.MessageID), term[len("message-id:"):])
		case strings.HasPrefix(term, "tag:"):
			for _, t := range m.Tags {
				ok = ok || t == term[len("tag:"):]
			}
		default:
			ok = strings.Contains(strings.ToLower(m.Subject), term)
		}
		if ok {
			all = append(all, map[string]any{"ID": m.ID, "MessageID": m.MessageID, "From": m.From, "To": m.To,
				"Subject": m.Subject, "Created": "2026-11-29T12:00:00Z", "Tags": m.Tags, "Snippet": m.Text})
		}
	}
	total := len(f.msgs)
	f.mu.Unlock()
	page := []map[string]any{}
	if start < len(all) {
		page = all[start:min(start+limit, len(all))]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"total": total, "unread": 0, "count": len(page),
		"messages_count": len(all), "messages_unread": 0, "start": start, "tags": []string{}, "messages": page})
}

func (f *fakeMailpit) find(id string) *fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.msgs {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func (f *fakeMailpit) get(w http.ResponseWriter, r *http.Request) {
	m := f.find(strings.TrimPrefix(r.URL.Path, "/api/v1/message/"))
	if m == nil {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(404)
		fmt.Fprint(w, "404 page not found")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ID": m.ID, "MessageID": m.MessageID, "From": m.From,
		"To": m.To, "Cc": []mpAddress{}, "Subject": m.Subject, "Date": "2026-11-29T12:00:00Z",
		"Tags": m.Tags, "Text": m.Text, "HTML": "", "Size": len(m.Text)})
}

func (f *fakeMailpit) release(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/message/"), "/release")
	if f.find(id) == nil {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(404)
		fmt.Fprint(w, "404 page not found")
		return
	}
	var body struct{ To []string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.To) == 0 {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(400)
		fmt.Fprint(w, "No valid addresses found")
		return
	}
	f.mu.Lock()
	f.relays = append(f.relays, body.To)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, "ok")
}
