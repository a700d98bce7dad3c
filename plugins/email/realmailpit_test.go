package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest/guesttest"
	"github.com/connhost/connhost/devkit/testing/testenv"
)

// The tests in this file run the connector against a real Mailpit server
// (the version pinned in tools/mailpit, started by testenv.Mailpit), to
// prove the API facts the connector relies on (custom Message-ID kept,
// message-id search is a substring match, --ignore-duplicate-ids answers an
// empty ID). They always run: testenv builds Mailpit on first use (or uses
// CONNHOST_MAILPIT_BIN) and fails the test when it cannot.

func realHost(base string) *testHost {
	return newTestHost(base, map[string]string{"base_url": base, "default_from": "", "basic_auth": ""})
}

func TestRealMailpit(t *testing.T) {
	base := testenv.Mailpit(t)
	const k = "ck_real_0001"

	o := sendOp(realHost(base), k, sendJSON)
	wantKind(t, o, abi.OutcomeOK, "")

	// Mailpit kept our Message-ID.
	g := invoke(realHost(base), abi.ExportExecute, "get_message", "", `{"id":"`+o.Receipt+`"}`)
	wantKind(t, g, abi.OutcomeOK, "")
	if v := guesttest.Result[messageView](t, g); v.MessageID != messageID(k) || v.Subject != "Invoice 42" {
		t.Fatalf("stored message %+v", v)
	}

	rec := reconcileOp(realHost(base), k)
	wantKind(t, rec, abi.OutcomeApplied, "")
	if rec.Receipt != o.Receipt {
		t.Fatalf("reconcile receipt %q, want %q", rec.Receipt, o.Receipt)
	}
	again := sendOp(realHost(base), k, sendJSON)
	if r := guesttest.Result[sendResult](t, again); !r.AlreadySent || again.Receipt != o.Receipt {
		t.Fatalf("second send %+v", r)
	}

	// The substring trap is real: Mailpit returns the look-alike for our
	// message-id query, and the connector does not count it.
	const k2 = "ck_real_0002"
	wantKind(t, sendOp(realHost(base), "x"+k2, sendJSON), abi.OutcomeOK, "")
	s := invoke(realHost(base), abi.ExportExecute, "search_messages", "", `{"query":"message-id:`+messageID(k2)+`"}`)
	var res struct {
		Total int `json:"total"`
	}
	if err := json.Unmarshal(s.Result, &res); err != nil || res.Total != 1 {
		t.Fatalf("raw message-id search %s: want the look-alike as a hit", s.Result)
	}
	wantKind(t, reconcileOp(realHost(base), k2), abi.OutcomeNotApplied, "")

	// The key tag is searchable.
	s = invoke(realHost(base), abi.ExportExecute, "search_messages", "", `{"query":"tag:`+keyTag(k)+`"}`)
	if err := json.Unmarshal(s.Result, &res); err != nil || res.Total != 1 {
		t.Fatalf("tag search %s", s.Result)
	}

	wantKind(t, invoke(realHost(base), abi.ExportExecute, "get_message", "", `{"id":"nosuchid"}`), abi.OutcomePermanent, "404")
	// No relay configured: Mailpit refuses the release.
	wantKind(t, invoke(realHost(base), abi.ExportExecute, "release_message", "", `{"id":"`+o.Receipt+`","to":"x@example.com"}`),
		abi.OutcomePermanent, "")
	// Mailpit's own validation is a permanent failure.
	wantKind(t, sendOp(realHost(base), "ck_real_0003", `{"to":"a@b@c","subject":"s","text":"t"}`), abi.OutcomePermanent, "invalid To address")
	wantKind(t, reconcileOp(realHost(base), "ck_real_0003"), abi.OutcomeNotApplied, "")
}

// TestRealMailpitIgnoreDuplicateIDs: with --ignore-duplicate-ids Mailpit
// answers a second send of one Message-ID with an empty ID.
func TestRealMailpitIgnoreDuplicateIDs(t *testing.T) {
	base := testenv.Mailpit(t, "--ignore-duplicate-ids")
	const k = "ck_real_dup"
	o := sendOp(realHost(base), k, sendJSON)
	wantKind(t, o, abi.OutcomeOK, "")
	body, _ := json.Marshal(map[string]any{
		"From": map[string]string{"Email": "a@b.c"}, "To": []map[string]string{{"Email": "d@e.f"}},
		"Subject": "dup", "Text": "dup", "Headers": map[string]string{"Message-ID": "<" + messageID(k) + ">"},
	})
	resp, err := http.Post(base+"/api/v1/send", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ ID *string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || out.ID == nil || *out.ID != "" {
		t.Fatalf("duplicate send: status %d ID %v err %v", resp.StatusCode, out.ID, err)
	}
	rec := reconcileOp(realHost(base), k)
	wantKind(t, rec, abi.OutcomeApplied, "")
	if rec.Receipt != o.Receipt {
		t.Fatalf("receipt %q, want %q", rec.Receipt, o.Receipt)
	}
}
