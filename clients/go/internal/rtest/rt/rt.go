// Package rt is what the runtime programs of the adapters' process tests
// share (adkrt, einort): their configuration, the executor they embed, the
// connhost HTTP API they serve for reviewers while they run, and the
// report they print.
package rt

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/connhost/connhost/clients/go/internal/scripted"
	"github.com/connhost/connhost/clients/go/internal/testkit"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// Config is a runtime program's one argument, as JSON.
type Config struct {
	// Phase is "first" (send the user's message), "resume" (continue from
	// the framework's saved state) or "plain" (the framework's own MCP
	// integration against MCPURL, without the adapter).
	Phase string `json:"phase"`
	// The embedded executor: its data directory, the manifests and
	// modules it loads, the Stripe (emulator) it charges.
	Data      string `json:"data"`
	Manifests string `json:"manifests"`
	Modules   string `json:"modules"`
	Stripe    string `json:"stripe"`
	// Cache is the executor's compilation cache, shared by the processes.
	Cache string `json:"cache"`
	// State is where the framework saves the run: ADK's session database,
	// Eino's checkpoint directory.
	State string `json:"state"`
	// Session is the ADK session id, the Eino checkpoint id.
	Session string `json:"session"`
	// CallID is the model's first tool call id; CountFile counts the
	// model's requests.
	CallID    string `json:"call_id"`
	CountFile string `json:"count_file"`
	// WaitSeconds is the adapter's ApprovalWait.
	WaitSeconds int `json:"wait_seconds"`
	// APIFile, when set, is where the program writes the URL of the
	// connhost HTTP API it serves over its executor (tokens RuntimeToken
	// and, for the approver rita, ApproverToken).
	APIFile       string `json:"api_file"`
	RuntimeToken  string `json:"runtime_token"`
	ApproverToken string `json:"approver_token"`
	// MCPURL and MCPToken are connhost serve's /mcp, for phase plain.
	MCPURL   string `json:"mcp_url"`
	MCPToken string `json:"mcp_token"`
}

// Report is the last line a runtime program prints.
type Report struct {
	// Final is the model's last answer ("" when the run paused).
	Final string `json:"final"`
	// Results are the tool results the model read.
	Results []string `json:"results"`
	// Requests is how many requests the model was asked in this process.
	Requests int `json:"requests"`
	// Paused: the run stopped on a call that awaits a reviewer.
	Paused bool `json:"paused"`
	// Approval names what the reviewer decides when Paused.
	ApprovalID string `json:"approval_id,omitempty"`
	ArgsDigest string `json:"args_digest,omitempty"`
}

// Payment is the call every scripted model makes.
const Payment = "payments_create_payment"

// Load reads the configuration from the program's argument.
func Load() Config {
	if len(os.Args) != 2 {
		Fail(fmt.Errorf("usage: %s CONFIG_JSON", filepath.Base(os.Args[0])))
	}
	var c Config
	if err := json.Unmarshal([]byte(os.Args[1]), &c); err != nil {
		Fail(fmt.Errorf("config: %w", err))
	}
	return c
}

// Model is the scripted model of the configuration.
func (c Config) Model() *scripted.Model {
	return scripted.New(scripted.Script{Tool: Payment, CallID: c.CallID, CountFile: c.CountFile,
		Args: map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}})
}

// Open opens the executor the program embeds and, with APIFile, serves
// the connhost HTTP API over it for reviewers.
func (c Config) Open(ctx context.Context) *host.Executor {
	ex, err := testkit.Open(ctx, c.Data, c.Manifests, c.Modules, c.Stripe, c.Cache)
	if err != nil {
		Fail(fmt.Errorf("open the executor: %w", err))
	}
	if c.APIFile == "" {
		return ex
	}
	h, err := httpapi.New(ex, httpapi.Options{
		Principals: []httpapi.Principal{
			{Name: "runtime", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: c.RuntimeToken},
			{Name: "rita", Roles: []httpapi.Role{httpapi.RoleApprover}, Token: c.ApproverToken},
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		Fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		Fail(err)
	}
	go func() { _ = (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
	if err := os.WriteFile(c.APIFile+".tmp", []byte("http://"+ln.Addr().String()), 0o644); err != nil {
		Fail(err)
	}
	if err := os.Rename(c.APIFile+".tmp", c.APIFile); err != nil {
		Fail(err)
	}
	return ex
}

// Wait is the adapter's ApprovalWait.
func (c Config) Wait() time.Duration { return time.Duration(c.WaitSeconds) * time.Second }

// Print prints the report as the last line of stdout.
func Print(r Report) {
	b, err := json.Marshal(r)
	if err != nil {
		Fail(err)
	}
	fmt.Println(string(b))
}

// Fail ends the program with err.
func Fail(err error) {
	fmt.Fprintln(os.Stderr, "runtime:", err)
	os.Exit(1)
}

// BearerTransport adds a bearer token to every request.
type BearerTransport struct{ Token string }

func (b BearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return http.DefaultTransport.RoundTrip(r)
}
