package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/connhost/connhost"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
)

// Example is a Go program that runs the connectors connhost ships in its
// own process and serves their approvals, and the reviewers' console, from
// its own http.Server: the first twenty lines after the set-up are the
// whole of it. The agent's tool calls go through ex.Execute; a gated call
// (payments.create_payment) waits for a reviewer, who approves it through
// the API (or the console at /ui/), and the same call sent again runs once.
func Example() {
	ctx := context.Background()
	dir, provider, cleanup := exampleSetup() // a temporary directory; Stripe's emulator stands in for https://api.stripe.com
	defer cleanup()

	ms, _ := connhost.Manifests() // the shipped connectors: payments (Stripe) and email
	if err := connhost.WriteModules(filepath.Join(dir, "modules")); err != nil {
		log.Fatal(err)
	}
	ex, err := host.Open(ctx, host.Options{DataDir: filepath.Join(dir, "data"), Manifests: ms, ModuleDir: filepath.Join(dir, "modules"),
		Config: func(c, k string) (string, bool) {
			v, ok := map[string]string{"api_key": "sk_test_x", "base_url": provider.URL}[k]
			return v, ok && c == "payments"
		},
		AllowHTTP: map[string][]string{"payments": {provider.URL}}}) // a provider the manifest does not list (api.stripe.com needs none)
	if err != nil {
		log.Fatal(err)
	}
	defer ex.Close(ctx)
	srv, err := server.New(ctx, server.Options{Executor: ex, Config: &server.Config{Principals: []server.PrincipalConfig{
		{Name: "rita", Roles: []httpapi.Role{httpapi.RoleApprover}, Token: ritaToken}}}}) // a reviewer
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	go srv.Run(ctx) // approvals expire and retries come due while nobody asks
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go (&http.Server{Handler: srv.Handler()}).Serve(ln) // the API, /mcp and the console at /ui/

	call := host.ToolCall{SessionID: "s1", ToolCallID: "call_1", Tool: "payments.create_payment",
		Arguments: json.RawMessage(`{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`)}
	res, _ := ex.Execute(ctx, call)
	fmt.Println(res.Status)
	url := "http://" + ln.Addr().String()
	fmt.Println(post(url+"/v1/approvals/"+res.Approval.ID+"/approve", ritaToken, `{"digest":"`+res.Approval.ArgsDigest+`"}`))
	res, _ = ex.Execute(ctx, call)
	fmt.Println(res.Status, "charges:", provider.charges())
	// Output:
	// awaiting_approval
	// 200 OK
	// succeeded charges: 1
}

// ritaToken is the example's reviewer's token: a real one comes from a
// secret store, 32 random bytes or more.
const ritaToken = "tok-rita-0123456789abcdef0123456789"

// exampleStripe is the Stripe emulator on a loopback port.
type exampleStripe struct {
	URL string
	emu *stripe.Server
}

// charges is how many payments the emulator has made.
func (s exampleStripe) charges() int { return len(s.emu.PaymentIntents()) }

// exampleSetup returns a temporary directory and a Stripe emulator, and
// what removes them.
func exampleSetup() (string, exampleStripe, func()) {
	dir, err := os.MkdirTemp("", "connhost-example-")
	if err != nil {
		log.Fatal(err)
	}
	emu := stripe.New(stripe.Options{})
	ts := httptest.NewServer(emu)
	return dir, exampleStripe{URL: ts.URL, emu: emu}, func() {
		ts.Close()
		emu.Close()
		os.RemoveAll(dir)
	}
}

// post sends body with a bearer token and returns the answer's status.
func post(url, token, body string) string {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	return resp.Status
}
