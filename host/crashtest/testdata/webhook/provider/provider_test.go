package provider

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func post(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/deliveries", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestIdempotency: the receiver keeps the promise the manifest declares.
func TestIdempotency(t *testing.T) {
	s := New()
	srv := httptest.NewServer(s)
	defer srv.Close()
	const body = `{"topic":"t","payload":{"a":1}}`
	first := post(t, srv.URL, "k1", body)
	again := post(t, srv.URL, "k1", body)
	if first.StatusCode != 200 || again.StatusCode != 200 || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d, again %d replayed %q", first.StatusCode, again.StatusCode, again.Header.Get("Idempotent-Replayed"))
	}
	if other := post(t, srv.URL, "k1", `{"topic":"u"}`); other.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("same key, other body: %d", other.StatusCode)
	}
	post(t, srv.URL, "", body)
	post(t, srv.URL, "", body)
	if n := len(s.Deliveries()); n != 3 {
		t.Fatalf("%d deliveries, want 3 (one per key, one per keyless request)", n)
	}
	resp, err := http.Get(srv.URL + "/v1/deliveries?idempotency_key=k1")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Data []Delivery }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 1 || list.Data[0].Key != "k1" {
		t.Fatalf("lookup by key: %v %+v", err, list)
	}
	// Without a key: every delivery (what the probe config counts).
	resp, err = http.Get(srv.URL + "/v1/deliveries")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 3 {
		t.Fatalf("every delivery: %v %d", err, len(list.Data))
	}
}

// TestHold: a held request is received but not applied until released; a
// retry with its key meanwhile gets 409.
func TestHold(t *testing.T) {
	s := New()
	srv := httptest.NewServer(s)
	defer srv.Close()
	if resp, err := http.Post(srv.URL+"/_crashtest/hold", "application/json", bytes.NewBufferString(`{"operation":"deliver"}`)); err != nil || resp.StatusCode != 204 {
		t.Fatalf("arm: %v %v", err, resp)
	}
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/deliveries", bytes.NewBufferString(`{"topic":"t"}`))
		req.Header.Set("Idempotency-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	for {
		var held struct{ Held int }
		resp, err := http.Get(srv.URL + "/_crashtest/held")
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&held)
		resp.Body.Close()
		if held.Held == 1 {
			break
		}
	}
	if got := post(t, srv.URL, "k", `{"topic":"t"}`); got.StatusCode != http.StatusConflict {
		t.Errorf("retry while held: %d, want 409", got.StatusCode)
	}
	if n := len(s.Deliveries()); n != 0 {
		t.Fatalf("%d deliveries before the release", n)
	}
	// The release answers once the held request was answered, saying how.
	resp, err := http.Post(srv.URL+"/_crashtest/release", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("release: %v %v", err, resp)
	}
	var rel struct{ Answers []int }
	if err := json.NewDecoder(resp.Body).Decode(&rel); err != nil || len(rel.Answers) != 1 || rel.Answers[0] != 200 {
		t.Fatalf("release answered %+v %v, want the held request's 200", rel, err)
	}
	if code := <-done; code != 200 {
		t.Fatalf("held request answered %d", code)
	}
	if n := len(s.Deliveries()); n != 1 {
		t.Fatalf("%d deliveries after the release, want 1", n)
	}
}
