package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// impostor is an HTTP server that pretends to be connhost: /healthz
// answers 200, every decision answers a made-up "approved by rita", and
// every Authorization header it is sent is kept.
type impostor struct {
	*httptest.Server
	// proof answers POST /v1/auth/proof: "" is 404 (no such route), "bad"
	// a well-formed proof computed with another token.
	proof string

	mu       sync.Mutex
	requests []string
	auth     []string
}

// fakeAnswer is the impostor's decision answer; the CLI must never print
// it.
const fakeAnswer = "ex_impostor"

func newImpostor(t *testing.T, proof string) *impostor {
	im := &impostor{proof: proof}
	im.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		im.mu.Lock()
		im.requests = append(im.requests, r.Method+" "+r.URL.Path)
		if h := r.Header.Get("Authorization"); h != "" {
			im.auth = append(im.auth, h)
		}
		im.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/healthz":
			fmt.Fprint(w, `{"status":"ok"}`)
		case r.URL.Path == "/v1/auth/proof" && im.proof == "bad":
			var req httpapi.ProofRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			json.NewEncoder(w).Encode(httpapi.ProofResponse{Auth: true, Principal: "rita", URLs: []string{im.URL},
				Proof: httpapi.ServerProof("a token the impostor made up", req.Nonce, req.TokenID, "rita", []string{im.URL})})
		case r.URL.Path == "/v1/auth/proof":
			http.NotFound(w, r)
		default:
			fmt.Fprintf(w, `{"execution_id":%q,"status":"succeeded","state":"succeeded","approval":{"id":"ap_x","decision":"approved","by":"rita"}}`, fakeAnswer)
		}
	}))
	t.Cleanup(im.Close)
	return im
}

func (im *impostor) seen() (requests, auth []string) {
	im.mu.Lock()
	defer im.mu.Unlock()
	return append([]string(nil), im.requests...), append([]string(nil), im.auth...)
}

// TestDiscoveryHandsNoTokenToAnImpostor: a server.json that no connhost
// server of this user wrote never gets the approver's token, and the CLI
// never prints what the process behind it answers. The file of the issue
// (pid 1, any /healthz answering 200) is ignored: pid 1 is not a connhost
// process listening on that port, so the approval is made on the ledger
// directly. A file naming a process that does listen there (this test's,
// which serves the impostor) gets as far as the server proof, which the
// impostor cannot give: the CLI refuses without sending the token. A file
// that is not mode 0600, and a --server URL naming the impostor, fare the
// same.
func TestDiscoveryHandsNoTokenToAnImpostor(t *testing.T) {
	d := testDirs(t)
	a := newApp(strings.NewReader(""), nil, nil)
	a.open = func(ctx context.Context, o openOptions) (*host.Executor, error) {
		a.g.manifests, a.g.modules = "testdata/manifests", d.modules
		o.allowUnpinned = true
		return a.openExecutor(ctx, o)
	}
	const token = "tok-rita-0123456789abcdef"
	t.Setenv(DefaultTokenEnv, token)
	gated := func(call string) host.Result {
		t.Helper()
		code, out, errOut := runCLI(t, a, "--data", d.data, "--json", "exec", "--session", "s1", "--tool-call", call, "--tool", "gated.echo", "--args", "{}")
		var res host.Result
		if err := json.Unmarshal([]byte(out), &res); code != cli.ExitNotSucceeded || err != nil || res.Approval == nil {
			t.Fatalf("exec %s: exit %d %q %q", call, code, out, errOut)
		}
		return res
	}
	plant := func(url string, pid int, mode os.FileMode) {
		t.Helper()
		path := filepath.Join(d.data, serverInfoFile)
		writeFile(t, d.data, serverInfoFile, fmt.Sprintf(`{"url":%q,"pid":%d,"command":"serve","auth":true}`, url, pid))
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	approve := func(res host.Result, extra ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, a, append([]string{"--data", d.data, "approve", res.Approval.ID, "--digest", res.Approval.ArgsDigest}, extra...)...)
	}
	noToken := func(name string, im *impostor, out, errOut string) {
		t.Helper()
		requests, auth := im.seen()
		t.Logf("%s: the impostor saw %v; stderr: %s", name, requests, errOut)
		if len(auth) > 0 {
			t.Errorf("%s: the impostor was sent %d Authorization header(s): %q", name, len(auth), auth)
		}
		if strings.Contains(out+errOut, fakeAnswer) {
			t.Errorf("%s: the CLI printed the impostor's answer:\n%s%s", name, out, errOut)
		}
		if strings.Contains(out+errOut, token) {
			t.Errorf("%s: the CLI printed the token", name)
		}
	}

	t.Run("pid 1", func(t *testing.T) {
		im := newImpostor(t, "")
		res := gated("c1")
		plant(im.URL, 1, 0o600)
		code, out, errOut := approve(res)
		noToken("pid 1", im, out, errOut)
		if requests, _ := im.seen(); len(requests) > 0 {
			t.Errorf("the CLI talked to the process of a file naming pid 1: %v", requests)
		}
		if code != cli.ExitOK || !strings.Contains(errOut, "ignoring "+filepath.Join(d.data, serverInfoFile)) ||
			!strings.Contains(out, "approved by "+localActor()) {
			t.Errorf("pid 1: exit %d, want the approval made directly on the ledger and a warning:\n%s%s", code, out, errOut)
		}
	})
	t.Run("a live process without the proof", func(t *testing.T) {
		for _, proof := range []string{"", "bad"} {
			im := newImpostor(t, proof)
			res := gated("c2" + proof)
			plant(im.URL, os.Getpid(), 0o600)
			code, out, errOut := approve(res)
			noToken("proof "+proof, im, out, errOut)
			if code != cli.ExitFailure || !strings.Contains(errOut, "was not sent") {
				t.Errorf("proof %q: exit %d, want a refusal saying the token was not sent:\n%s%s", proof, code, out, errOut)
			}
		}
	})
	t.Run("mode 0644", func(t *testing.T) {
		im := newImpostor(t, "")
		res := gated("c3")
		plant(im.URL, os.Getpid(), 0o644)
		code, out, errOut := approve(res)
		noToken("mode 0644", im, out, errOut)
		if code != cli.ExitOK || !strings.Contains(errOut, "mode 0644") {
			t.Errorf("mode 0644: exit %d, want the file ignored for its mode:\n%s%s", code, out, errOut)
		}
	})
	t.Run("--server", func(t *testing.T) {
		im := newImpostor(t, "")
		res := gated("c4")
		if err := os.Remove(filepath.Join(d.data, serverInfoFile)); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := approve(res, "--server", im.URL)
		noToken("--server", im, out, errOut)
		if code != cli.ExitFailure || !strings.Contains(errOut, "cannot prove that it holds the token") {
			t.Errorf("--server: exit %d:\n%s%s", code, out, errOut)
		}
	})
}
