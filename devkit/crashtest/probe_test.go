package crashtest

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// itemsServer is a small provider without a probe contract: items with a
// unique ref (a second create with one answers 400), listed with a total,
// looked up and deleted by id. Creates replayed by Idempotency-Key carry
// Idempotent-Replayed: true.
type itemsServer struct {
	mu    sync.Mutex
	items map[string]map[string]any
	keys  map[string]string
	n     int
	auth  []string
}

func newItems(t *testing.T) (*itemsServer, string) {
	s := &itemsServer{items: map[string]map[string]any{}, keys: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /base/items", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		var in map[string]any
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if id, ok := s.keys[r.Header.Get("Idempotency-Key")]; ok && r.Header.Get("Idempotency-Key") != "" {
			w.Header().Set("Idempotent-Replayed", "true")
			_ = json.NewEncoder(w).Encode(s.items[id])
			return
		}
		for _, it := range s.items {
			if it["ref"] == in["ref"] && in["ref"] != nil {
				http.Error(w, `{"data":{"ref":{"code":"validation_not_unique"}}}`, 400)
				return
			}
		}
		s.n++
		in["id"] = fmt.Sprintf("it%d", s.n)
		s.items[in["id"].(string)] = in
		s.keys[r.Header.Get("Idempotency-Key")] = in["id"].(string)
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(in)
	})
	mux.HandleFunc("GET /base/items", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		_ = json.NewEncoder(w).Encode(map[string]any{"totalItems": len(s.items)})
	})
	mux.HandleFunc("GET /base/items/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if it, ok := s.items[r.PathValue("id")]; ok {
			_ = json.NewEncoder(w).Encode(it)
			return
		}
		http.NotFound(w, r)
	})
	mux.HandleFunc("DELETE /base/items/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.items[r.PathValue("id")]; !ok {
			http.NotFound(w, r)
			return
		}
		delete(s.items, r.PathValue("id"))
		w.WriteHeader(204)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, srv.URL + "/base"
}

const itemsProbe = `
[probe]
headers = { Authorization = "Bearer {env.TOKEN}" }

[operation.create]
hold = "POST /items"
args = '{"name": "n \"{unique}\"", "ref": "{unique}"}'
receipt = "GET /items/{receipt}"
effects = { count = "GET /items?page=1", json = "totalItems" }

[operation.create_counted]
args = '{}'
effects = { answers = "POST /items", unless_header = "Idempotent-Replayed: true" }

[operation.delete]
hold = "DELETE /items/{id}"
setup = { request = "POST /items", body = '{"name": "doomed", "ref": "d-{unique}"}' }
args = '{"id": "{setup.id}"}'
receipt = "GET /items/{receipt}"
effects = { count = "GET /items", json = "totalItems", removes = true }
`

func startItemsProbe(t *testing.T) (*itemsServer, *ConfigProbe) {
	t.Helper()
	s, base := newItems(t)
	cfg, err := ParseProbeConfig("items.probe.toml", []byte(itemsProbe), env(map[string]string{"TOKEN": "t0k"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProbe(cfg, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return s, p
}

func postItem(t *testing.T, u, key, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestConfigProbe: the proxy forwards the connector's requests under the
// provider URL's path, counts answers, and the probe's own requests
// (counts, receipts, setups) carry the config's headers and fill its
// placeholders.
func TestConfigProbe(t *testing.T) {
	ctx := context.Background()
	s, p := startItemsProbe(t)
	if !strings.HasSuffix(p.URL(), "/base") || !strings.HasPrefix(p.URL(), "http://127.0.0.1:") {
		t.Fatalf("proxy URL %s", p.URL())
	}
	args, err := p.Args(ctx, "create")
	if err != nil {
		t.Fatal(err)
	}
	var a struct{ Name, Ref string }
	if err := json.Unmarshal(args, &a); err != nil || len(a.Ref) != 16 || a.Name != `n "`+a.Ref+`"` {
		t.Fatalf("args %s: %v", args, err)
	}
	st, _, body := postItem(t, p.URL()+"/items", "k1", string(args))
	if st != 201 {
		t.Fatalf("create through the proxy: %d %s", st, body)
	}
	if st, h, _ := postItem(t, p.URL()+"/items", "k1", string(args)); st != 200 || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", st, h)
	}
	if n, err := p.Effects(ctx, "create"); err != nil || n != 1 {
		t.Fatalf("count: %d %v", n, err)
	}
	if n, err := p.Effects(ctx, "create_counted"); err != nil || n != 1 {
		t.Fatalf("answers counted without the replay: %d %v", n, err)
	}
	var it struct{ ID string }
	_ = json.Unmarshal([]byte(body), &it)
	for receipt, want := range map[string]string{it.ID: "", "it999": "receipt it999 names no object", "": "succeeded without a receipt"} {
		if problem, err := p.CheckReceipt(ctx, "create", receipt); err != nil || !strings.Contains(problem, want) || (want == "") != (problem == "") {
			t.Errorf("receipt %q: %q %v, want %q", receipt, problem, err, want)
		}
	}
	// A delete: the setup makes what it deletes; the count runs down.
	before, _ := p.Effects(ctx, "delete")
	dargs, err := p.Args(ctx, "delete")
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ ID string }
	if err := json.Unmarshal(dargs, &d); err != nil || d.ID == "" {
		t.Fatalf("delete args %s: %v", dargs, err)
	}
	mid, _ := p.Effects(ctx, "delete")
	req, _ := http.NewRequest("DELETE", p.URL()+"/items/"+d.ID, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	after, _ := p.Effects(ctx, "delete")
	if mid != before-1 || after-mid != 1 {
		t.Fatalf("delete effects: before %d, after the setup %d, after the delete %d", before, mid, after)
	}
	if problem, err := p.CheckReceipt(ctx, "delete", d.ID); problem != "" || err != nil {
		t.Errorf("a deleted object's receipt: %q %v", problem, err)
	}
	if problem, _ := p.CheckReceipt(ctx, "delete", it.ID); !strings.Contains(problem, "still names an object") {
		t.Errorf("a delete whose object is still there: %q", problem)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range s.auth {
		if h != "Bearer t0k" && h != "" {
			t.Errorf("request %d carried Authorization %q", i, h)
		}
	}
	if s.auth[0] != "" || s.auth[len(s.auth)-1] != "Bearer t0k" {
		t.Errorf("the connector's requests must not carry the probe's headers, the probe's must: %q", s.auth)
	}
}

// TestConfigProbeHold: a held request is received but not forwarded
// until released, whatever its client does; then it is forwarded, and
// HeldAnswer tells what the provider answered it (here the unique
// field's refusal, because a re-dispatch created the item meanwhile).
func TestConfigProbeHold(t *testing.T) {
	ctx := context.Background()
	_, p := startItemsProbe(t)
	if err := p.Arm(ctx, "delete_missing"); !errors.Is(err, ErrCannotHold) {
		t.Fatalf("arm an operation without hold: %v", err)
	}
	if err := p.Arm(ctx, "create"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		req, _ := http.NewRequestWithContext(cctx, "POST", p.URL()+"/items", strings.NewReader(`{"name": "a", "ref": "r1"}`))
		_, _ = http.DefaultClient.Do(req)
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := p.WaitHeld(wctx); err != nil {
		t.Fatal(err)
	}
	cancel() // the client gives up, as a killed host does
	if n, _ := p.Effects(ctx, "create"); n != 0 {
		t.Fatalf("%d effects while held", n)
	}
	// The re-dispatch passes: only the next request was held.
	if st, _, b := postItem(t, p.URL()+"/items", "", `{"name": "a", "ref": "r1"}`); st != 201 {
		t.Fatalf("re-dispatch: %d %s", st, b)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := p.HeldAnswer(wctx)
	if err != nil || st != 400 {
		t.Fatalf("held answer %d %v, want the provider's 400", st, err)
	}
	if n, _ := p.Effects(ctx, "create"); n != 1 {
		t.Fatalf("%d effects after release, want 1", n)
	}
}

// TestConfigProbeCountsBareArray: a provider whose list answers a bare
// JSON array (no envelope) is counted by the array's length, with json
// left out or empty; an answer that is neither a number nor an array
// there is an error that says how to count instead (a path, or answers).
func TestConfigProbeCountsBareArray(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/entries":
			_, _ = w.Write([]byte(`[{"id": 1}, {"id": 2}, {"id": 3}]`))
		case "/feeds":
			_, _ = w.Write([]byte(`{"total": 3}`))
		}
	}))
	defer srv.Close()
	src := `
[operation.bare]
effects = { count = "GET /entries" }

[operation.empty_path]
effects = { count = "GET /entries", json = "" }

[operation.object]
effects = { count = "GET /feeds" }
`
	cfg, err := ParseProbeConfig("bare.probe.toml", []byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProbe(cfg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, op := range []string{"bare", "empty_path"} {
		if n, err := p.Effects(ctx, op); err != nil || n != 3 {
			t.Errorf("%s: %d effects, %v; want the array's 3", op, n, err)
		}
	}
	_, err = p.Effects(ctx, "object")
	for _, want := range []string{"the answer is an object, want a number or an array", `json = "PATH"`, `answers = "METHOD /path"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an object counted without a path: %v, want it to say %q", err, want)
		}
	}
}

// TestConfigProbeOwnReceipt: a receipt must name what a request of the
// cell that takes the operation's effect made (its id in the provider's
// answer) or named (a delete's path); an object that exists but that no
// such request of this cell named — another call's, an older one — is a
// wrong receipt. A new cell forgets the earlier cell's objects.
func TestConfigProbeOwnReceipt(t *testing.T) {
	ctx := context.Background()
	_, p := startItemsProbe(t)
	create := func(ref string) string {
		t.Helper()
		st, _, body := postItem(t, p.URL()+"/items", "", `{"name": "n", "ref": "`+ref+`"}`)
		var it struct{ ID string }
		if err := json.Unmarshal([]byte(body), &it); err != nil || st != 201 {
			t.Fatalf("create: %d %s", st, body)
		}
		return it.ID
	}
	if err := p.StartCell(ctx, "create"); err != nil {
		t.Fatal(err)
	}
	older := create("older")
	if err := p.StartCell(ctx, "create"); err != nil {
		t.Fatal(err)
	}
	own := create("own")
	if problem, err := p.OwnReceipt(ctx, "create", own); problem != "" || err != nil {
		t.Errorf("the cell's own item: %q %v", problem, err)
	}
	problem, err := p.OwnReceipt(ctx, "create", older)
	if err != nil || !strings.Contains(problem, "receipt "+older+" names an object that exists but is not this call's effect") {
		t.Errorf("an earlier cell's item: %q %v", problem, err)
	}
	// A delete names its object in the path, whatever the answer.
	if err := p.StartCell(ctx, "delete"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("DELETE", p.URL()+"/items/"+own, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	if problem, _ := p.OwnReceipt(ctx, "delete", own); problem != "" {
		t.Errorf("the deleted item: %q", problem)
	}
	if problem, _ := p.OwnReceipt(ctx, "delete", older); problem == "" {
		t.Error("a delete's receipt naming an item the cell did not delete passed")
	}
}

// TestConfigProbeOwnReceiptGzip: a provider that compresses its answer
// for a connector asking for gzip (Mailpit does) still names what it made:
// the proxy forwards the answer as sent and reads it unzipped.
func TestConfigProbeOwnReceiptGzip(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write([]byte(`{"ID": "msg_7"}`))
		_ = zw.Close()
	}))
	defer srv.Close()
	cfg, err := ParseProbeConfig("mail.probe.toml", []byte("[operation.send]\nhold = \"POST /send\"\nreceipt = \"GET /message/{receipt}\"\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProbe(cfg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.StartCell(ctx, "send"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", p.URL()+"/send", strings.NewReader(`{}`))
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("the answer was not forwarded as sent: %v", resp.Header)
	}
	if problem, err := p.OwnReceipt(ctx, "send", "msg_7"); problem != "" || err != nil {
		t.Errorf("the gzipped answer's ID: %q %v", problem, err)
	}
}
