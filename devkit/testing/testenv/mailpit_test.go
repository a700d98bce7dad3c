package testenv

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The version testenv builds must be the one tools/mailpit pins.
func TestMailpitVersionMatchesToolsModule(t *testing.T) {
	dir, err := toolsDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := "github.com/axllent/mailpit " + MailpitVersion
	if !strings.Contains(string(b), want) {
		t.Fatalf("tools/mailpit/go.mod does not require %q; update MailpitVersion or the pin", want)
	}
	if !strings.Contains(string(b), "tool github.com/axllent/mailpit") {
		t.Fatal("tools/mailpit/go.mod lost its tool directive")
	}
}

// Mailpit serves its API and reports the pinned version.
func TestMailpitStarts(t *testing.T) {
	base := Mailpit(t)
	resp, err := http.Get(base + "/api/v1/info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/info: %s", resp.Status)
	}
	var info struct {
		Version  string
		Messages int
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.Messages != 0 {
		t.Fatalf("fresh Mailpit has %d messages", info.Messages)
	}
}

// The version testenv builds must be the one tools/pocketbase pins.
func TestPocketBaseVersionMatchesToolsModule(t *testing.T) {
	dir, err := toolDir("pocketbase")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/pocketbase/pocketbase " + PocketBaseVersion; !strings.Contains(string(b), want) {
		t.Fatalf("tools/pocketbase/go.mod does not require %q; update PocketBaseVersion or the pin", want)
	}
	if !strings.Contains(string(b), "tool github.com/pocketbase/pocketbase/examples/base") {
		t.Fatal("tools/pocketbase/go.mod lost its tool directive")
	}
}

// PocketBase starts with a superuser who may make collections, and a
// unique index refuses a second record with the same value.
func TestPocketBaseStarts(t *testing.T) {
	pb := StartPocketBase(t)
	pb.CreateCollection(t, "items", []map[string]any{{"name": "ref", "type": "text"}}, []string{"CREATE UNIQUE INDEX idx_items_ref ON items (ref)"})
	if err := pocketBaseDo(pb.URL, pb.Token, "POST", "/api/collections/items/records", map[string]string{"ref": "a"}, nil); err != nil {
		t.Fatal(err)
	}
	err := pocketBaseDo(pb.URL, pb.Token, "POST", "/api/collections/items/records", map[string]string{"ref": "a"}, nil)
	if err == nil || !strings.Contains(err.Error(), "validation_not_unique") {
		t.Fatalf("second record with the same ref: %v", err)
	}
}
