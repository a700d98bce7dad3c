package mailpit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/mailpit"
	"github.com/connhost/connhost/devkit/sandbox/statefile"
)

func persistent(t *testing.T, path string) (*mailpit.Server, string) {
	t.Helper()
	srv := mailpit.New(mailpit.Options{})
	if err := srv.Persist(path); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return srv, hs.URL
}

func send(t *testing.T, base string, r mailpit.SendRequest) *http.Response {
	t.Helper()
	b, _ := json.Marshal(r)
	resp, err := http.Post(base+"/api/v1/send", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestPersistSurvivesRestart: messages, their tags and deletions saved by
// one server are what the next one on the same file serves and searches,
// including a message stored by a send whose answer a fault replaced.
func TestPersistSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mailpit.json")
	a, aURL := persistent(t, path)
	send(t, aURL, mail("kept", "<kept@connhost.test>", "Invoice"))
	send(t, aURL, mail("deleted", "<deleted@connhost.test>"))
	if err := a.Faults().Add(fault.Rule{Kind: fault.Status, Apply: true, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if r := send(t, aURL, mail("applied", "<applied@connhost.test>")); r.StatusCode != 500 {
		t.Fatalf("applied-then-failed send: %d", r.StatusCode)
	}
	var deleted string
	for _, m := range a.Messages() {
		if m.Subject == "deleted" {
			deleted = m.ID
		}
	}
	body, _ := json.Marshal(map[string][]string{"IDs": {deleted}})
	req, _ := http.NewRequest(http.MethodDelete, aURL+"/api/v1/messages", bytes.NewReader(body))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete: %v", err)
	}

	b, bURL := persistent(t, path)
	var subjects []string
	for _, m := range b.Messages() {
		subjects = append(subjects, m.Subject)
	}
	if strings.Join(subjects, ",") != "applied,kept" {
		t.Fatalf("messages after restart: %v", subjects)
	}
	resp, err := http.Get(bURL + "/api/v1/search?query=" + url.QueryEscape("message-id:kept@connhost.test tag:invoice"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res mailpit.MessagesSummary
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || len(res.Messages) != 1 || res.Messages[0].Tags[0] != "Invoice" {
		t.Fatalf("search after restart: %+v %v", res, err)
	}
	if st := b.Stats(); st.MessagesSent != 3 || st.Deleted != 1 {
		t.Fatalf("stats after restart: %+v", st)
	}
}

func TestPersistRefusesCorruptState(t *testing.T) {
	for name, text := range map[string]string{
		"not JSON":       `messages`,
		"future version": `{"version": 9}`,
		"duplicate id":   `{"version": 1, "messages": [{"message": {"ID": "a", "MessageID": "x"}}, {"message": {"ID": "a", "MessageID": "y"}}]}`,
		"tag casing":     `{"version": 1, "tag_names": {"Invoice": "Invoice"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mailpit.json")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			err := mailpit.New(mailpit.Options{}).Persist(path)
			if !errors.Is(err, statefile.ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Persist = %v", err)
			}
		})
	}
}
