package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost"
	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/console"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/notify"
	"github.com/connhost/connhost/server/tooldefs"
)

// startSandbox starts the local provider emulators (Stripe and Mailpit API
// subsets): payments on listen, email on the next port (or a free one when
// listen's port is 0). With stateDir they keep their state there across
// restarts; without, in memory.
func startSandbox(ctx context.Context, listen, stateDir string, logger *slog.Logger) (*sandbox.Sandbox, error) {
	return sandbox.Start(ctx, sandbox.Options{Listen: listen, StateDir: stateDir, Logger: logger})
}

// devConfig hands the dev connectors their provider URLs and test keys
// (manifests/payments.toml declares config ["api_key", "base_url"],
// manifests/email.toml ["base_url", "default_from", "basic_auth"]). Values
// from a --config file win.
func devConfig(paymentsURL, emailURL string, file *server.Config) func(connector, key string) (string, bool) {
	return func(connector, key string) (string, bool) {
		if file != nil {
			if v, ok := file.Lookup(connector, key); ok {
				return v, true
			}
		}
		switch connector + "." + key {
		case "payments.base_url":
			return paymentsURL, paymentsURL != ""
		case "payments.api_key":
			return "sk_test_connhost_dev", true
		case "email.base_url":
			return emailURL, emailURL != ""
		}
		return "", false
	}
}

func (k *kit) devCommand() *cobra.Command {
	var listen, paymentsURL, emailURL string
	c := &cobra.Command{
		Use:   "dev [--listen 127.0.0.1:8420] [--payments-url URL] [--email-url URL]",
		Short: "Run everything locally: connectors, ledger, provider sandbox, HTTP API",
		Long: `dev is the quickest way to try connhost. It builds the connectors whose
modules are missing from --modules, opens the ledger in --data, starts the
provider sandbox (local emulators of the Stripe and Mailpit APIs) unless
--payments-url and --email-url point elsewhere, serves the HTTP API on
loopback without a token, and prints what to try next. Ctrl-C stops it all.

dev has no credentials: anyone on this machine can execute, approve, reject
and resolve calls through its API, and every decision is recorded as
"dev-loopback" (a "by" sent in the body is kept in the reason as an
unverified claim). For real approvals, use connhost serve with approver
principals (see connhost serve --help).

The sandbox keeps its state in --data/sandbox next to the ledger, saved
before each answer: kill dev (or let CONNHOST_CRASH_AT kill it), start it
again, and recovery meets a provider that remembers the payments, refunds,
idempotency keys and messages it saw.

The ledger's witness is kept beside --data (.connhost.witness for the
default ./.connhost): a data directory deleted or replaced by an older
copy makes dev refuse to start (exit 6) instead of running again the calls
the ledger had recorded. To start over, pass --init (the old ledger and
witness are set aside), or remove both.

Each call that starts to await approval or to need an operator, and each
session it fences, is also mailed (to reviewer@localhost, tagged
connhost-notification) through the e-mail provider dev uses (the sandbox's
Mailpit, or the one --email-url names), with a link to the console, and
POSTed to the webhook of the --config file's [notify] table, if it has one.

With --json it prints one startup line {"api": URL, "payments": URL,
"email": URL} on stdout and logs JSON on stderr.`,
		Example: `  connhost dev
  connhost dev --json | head -1 | jq -r .api`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !server.IsLoopbackListen(listen) {
				return cli.Usagef("dev serves without a token and only listens on loopback (got --listen %s); use connhost serve", listen)
			}
			ctx := cmd.Context()
			ms, err := k.devConnectors(ctx, cmd)
			if err != nil {
				return err
			}
			needPayments, needEmail := emulatorsFor(ms, paymentsURL, emailURL)
			if needPayments || needEmail {
				sb, err := startSandbox(ctx, "127.0.0.1:0", filepath.Join(k.Data(), "sandbox"), k.Logger())
				if err != nil {
					return fmt.Errorf("start provider sandbox: %w", err)
				}
				defer sb.Close()
				if needPayments {
					paymentsURL = sb.PaymentsURL()
				}
				if needEmail {
					emailURL = sb.EmailURL()
				}
			}
			var file *server.Config
			if k.Config() != "" {
				if file, err = k.LoadConfig(); err != nil {
					return err
				}
			}
			first, firstArgs := "", ""
			if tools, err := tooldefs.Tools(ms); err == nil && len(tools) > 0 {
				first = tools[0].Name
				for _, t := range tools {
					if t.Name == "payments.create_payment" {
						first = t.Name // the call the README walks through
					}
				}
				firstArgs = exampleArgs(ms, first)
			}
			cfg := devConfig(paymentsURL, emailURL, file)
			// dev has no credentials: of --config it takes the
			// connectors' values, [mcp] and [notify].
			served := &server.Config{Server: server.ServerConfig{Listen: listen}}
			if file != nil {
				served.Path, served.MCP, served.Notify = file.Path, file.MCP, file.Notify
			}
			var chans []notify.Channel
			if emailURL != "" {
				chans = append(chans, notify.NewMailpit(emailURL, "connhost@localhost", "reviewer@localhost"))
				k.Logger().Info("notifications: an e-mail to the local Mailpit for each call that starts to wait", "mailpit", emailURL,
					"to", "reviewer@localhost", "search", "tag:"+notify.MailTag)
			}
			return k.ServeDev(ctx, DevServe{
				Config:       served,
				Values:       cfg,
				ExtraOrigins: devOrigins(cfg),
				Channels:     chans,
				Ready: func(api string) {
					if k.JSON() {
						line := map[string]string{"api": api}
						if paymentsURL != "" {
							line["payments"] = paymentsURL
						}
						if emailURL != "" {
							line["email"] = emailURL
						}
						writeJSONLine(k.Stdout(), line)
						return
					}
					renderDevBanner(k.Stdout(), api, paymentsURL, emailURL, first, firstArgs)
				},
			})
		},
	}
	f := c.Flags()
	f.StringVar(&listen, "listen", server.DefaultListen, "API address (loopback only)")
	f.StringVar(&paymentsURL, "payments-url", "", "use this payments provider instead of the sandbox's")
	f.StringVar(&emailURL, "email-url", "", "use this email provider instead of the sandbox's")
	return c
}

// emulatorsFor says which emulators dev starts: they stand in for the
// shipped connectors' providers only, so one starts when its connector
// (payments, email) is loaded and no --payments-url or --email-url points
// it elsewhere.
func emulatorsFor(ms []*manifests.Manifest, paymentsURL, emailURL string) (payments, email bool) {
	loaded := func(name string) bool {
		return slices.ContainsFunc(ms, func(m *manifests.Manifest) bool { return m.Connector.Name == name })
	}
	return paymentsURL == "" && loaded("payments"), emailURL == "" && loaded("email")
}

// devOrigins is dev mode's addition to the http capability: the loopback
// origin of each connector's configured base_url (the sandbox listens on
// ports chosen at run time, which no manifest can list). Non-loopback
// base URLs are not added: dev never widens a connector's reach beyond
// this machine.
func devOrigins(cfg func(connector, key string) (string, bool)) func(m *manifests.Manifest) []string {
	return func(m *manifests.Manifest) []string {
		if !slices.Contains(m.Capabilities.Config, "base_url") {
			return nil
		}
		raw, ok := cfg(m.Connector.Name, "base_url")
		if !ok {
			return nil
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
			return nil
		}
		h := u.Hostname()
		if ip := net.ParseIP(h); (ip == nil || !ip.IsLoopback()) && h != "localhost" {
			return nil
		}
		origin := u.Scheme + "://" + u.Host
		if slices.Contains(m.Capabilities.HTTP, origin) {
			return nil
		}
		return []string{origin}
	}
}

// exampleArgs returns sample arguments for the tool the banner suggests:
// the shipped tools' own, else a minimal document built from the tool's
// input schema (its required members, each the simplest value its schema
// allows), and only when the schema accepts it; "" when none is found.
func exampleArgs(ms []*manifests.Manifest, tool string) string {
	switch tool {
	case "payments.create_payment":
		return `{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`
	case "email.send":
		return `{"to":["ada@example.com"],"subject":"hello","text":"sent once"}`
	}
	conn, opName, _ := strings.Cut(tool, ".")
	for _, m := range ms {
		if m.Connector.Name != conn {
			continue
		}
		op, ok := m.Operation(opName)
		if !ok {
			return ""
		}
		var schema map[string]any
		if json.Unmarshal(op.SchemaJSON(), &schema) != nil {
			return ""
		}
		b, err := json.Marshal(sampleOf(schema, 0))
		if err != nil || op.ValidateArgs(b) != nil {
			return ""
		}
		return string(b)
	}
	return ""
}

// sampleOf returns the simplest instance of a JSON schema that it plainly
// allows: an enum's first value, a minimum, a string of minLength, an
// object of its required properties. exampleArgs checks the result.
func sampleOf(schema map[string]any, depth int) any {
	if depth > 8 {
		return nil
	}
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	if c, ok := schema["const"]; ok {
		return c
	}
	typ, _ := schema["type"].(string)
	if ts, ok := schema["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	num := func(def float64) float64 {
		if v, ok := schema["minimum"].(float64); ok {
			return v
		}
		if v, ok := schema["exclusiveMinimum"].(float64); ok {
			return v + 1
		}
		return def
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		req, _ := schema["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			sub, _ := props[name].(map[string]any)
			out[name] = sampleOf(sub, depth+1)
		}
		return out
	case "array":
		out := []any{}
		n, _ := schema["minItems"].(float64)
		items, _ := schema["items"].(map[string]any)
		for range int(n) {
			out = append(out, sampleOf(items, depth+1))
		}
		return out
	case "integer":
		return int64(num(1))
	case "number":
		return num(1)
	case "boolean":
		return true
	case "string":
		if f, _ := schema["format"].(string); f == "email" {
			return "ada@example.com"
		}
		s := "example"
		if n, ok := schema["minLength"].(float64); ok && int(n) > len(s) {
			s += strings.Repeat("x", int(n)-len(s))
		}
		if n, ok := schema["maxLength"].(float64); ok && int(n) < len(s) {
			s = s[:int(n)]
		}
		return s
	}
	return nil
}

// renderDevBanner prints what dev started and what to try: args are the
// suggested tool's sample arguments ("" when none is known).
func renderDevBanner(w io.Writer, api, payments, email, tool, args string) {
	fmt.Fprintf(w, "connhost dev is running\n\n")
	fmt.Fprintf(w, "  API       %s   (OpenAPI: %s/openapi.json)\n", api, api)
	fmt.Fprintf(w, "  console   %s%s   (approvals, recovery, executions, connectors)\n", api, console.Prefix)
	if payments != "" {
		fmt.Fprintf(w, "  payments  %s\n", payments)
	}
	if email != "" {
		fmt.Fprintf(w, "  email     %s\n", email)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "No tokens: anyone on this machine can approve, reject and resolve calls\n")
	fmt.Fprintf(w, "through this API and its console; decisions are recorded as %q.\n\n", httpapi.DevLoopback.Name)
	fmt.Fprintf(w, "Try:\n")
	fmt.Fprintf(w, "  curl -s '%s/v1/tools?format=openai'\n", api)
	if tool != "" {
		shown := args
		if shown == "" {
			shown = "ARGS"
		}
		fmt.Fprintf(w, "  curl -s %s/v1/executions -H 'Content-Type: application/json' \\\n", api)
		fmt.Fprintf(w, "    -d '{\"session_id\":\"s1\",\"tool_call_id\":\"call_1\",\"tool\":\"%s\",\"arguments\":%s}'\n", tool, shown)
		if args == "" {
			fmt.Fprintf(w, "    (ARGS: an object its input schema accepts; curl -s '%s/v1/tools?format=openai' shows it)\n", api)
		}
		fmt.Fprintf(w, "    (a gated call answers awaiting_approval: approve it with\n")
		fmt.Fprintf(w, "     curl -s -X POST %s/v1/approvals/<approval.id>/approve -H 'Content-Type: application/json' \\\n", api)
		fmt.Fprintf(w, "       -d '{\"digest\":\"<approval.args_digest>\"}'\n")
		fmt.Fprintf(w, "     or connhost approve <approval.id> --digest <approval.args_digest>,\n")
		fmt.Fprintf(w, "     then send the same call again to run it)\n")
	}
	fmt.Fprintf(w, "  curl -s '%s/v1/executions?state=recovery_required'\n\n", api)
	fmt.Fprintf(w, "Ctrl-C stops everything.\n")
}

func writeJSONLine(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}

// useShipped reports whether dev and demo run on the connectors built
// into this binary (package connhost): --manifests was left at its
// default and there is no such directory here, as when the binary alone
// is run in an empty directory.
func (k *kit) useShipped(cmd *cobra.Command) bool {
	if cmd.Flags().Changed("manifests") {
		return false
	}
	_, err := os.Stat(k.Manifests())
	return errors.Is(err, fs.ErrNotExist)
}

// runOnShipped makes the command run on the connectors built into this
// binary, their modules in modules ("": --modules).
func (k *kit) runOnShipped(modules string) {
	k.shipped = true
	k.RunOnShipped(modules)
}

// manifestText returns the bytes m was parsed from.
func (k *kit) manifestText(m *manifests.Manifest) ([]byte, error) {
	if k.shipped {
		return connhost.ManifestText(m.Connector.Name)
	}
	return os.ReadFile(m.Path)
}

// devConnectors returns the manifests dev runs on, their modules in
// --modules: those of --manifests, with the modules missing from
// --modules built from plugins/ (a source tree); or, where useShipped,
// the shipped connectors, their modules written to --modules (by default
// <data>/modules) and verified against their pins.
func (k *kit) devConnectors(ctx context.Context, cmd *cobra.Command) ([]*manifests.Manifest, error) {
	if !k.useShipped(cmd) {
		ms, err := k.LoadManifests()
		if err != nil {
			return nil, err
		}
		return ms, k.buildMissing(ctx, ms)
	}
	modules := ""
	if !cmd.Flags().Changed("modules") {
		// Inside the data directory, which is the ledger's: created as
		// the ledger creates it (owner only), not by the modules' write.
		if err := os.MkdirAll(k.Data(), 0o700); err != nil {
			return nil, err
		}
		modules = filepath.Join(k.Data(), "modules")
	}
	k.runOnShipped(modules)
	if err := connhost.WriteModules(k.Modules()); err != nil {
		return nil, err
	}
	k.Logger().Info("no "+k.Manifests()+" here: running the connectors built into this binary", "connectors", "email, payments", "modules", k.Modules())
	return k.LoadManifests()
}

// buildMissing builds plugins/<connector> for every manifest whose module
// is missing from --modules.
func (k *kit) buildMissing(ctx context.Context, ms []*manifests.Manifest) error {
	for _, m := range ms {
		out := m.ModulePath(k.Modules())
		if _, err := os.Stat(out); err == nil {
			continue
		}
		src := filepath.Join("plugins", m.Connector.Name)
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("module %s is missing and there is no %s to build it from", out, src)
		}
		fmt.Fprintf(k.Stderr(), "building %s → %s\n", src, out)
		if _, err := wasmbuild.Build(ctx, src, out); err != nil {
			return err
		}
	}
	return nil
}

func (k *kit) sandboxCommand() *cobra.Command {
	var listen, state string
	c := &cobra.Command{
		Use:   "sandbox [--listen ADDR] [--state DIR]",
		Short: "Run the local provider emulators (Stripe and Mailpit API subsets)",
		Long: `sandbox runs the provider emulators that dev uses, on their own, until
Ctrl-C: a Stripe API subset with Stripe's idempotency semantics and a
Mailpit API subset. Tests and demos point connectors at them.

With --state DIR they load their state from DIR/stripe.json and
DIR/mailpit.json and save it there before each answer, so a killed sandbox
restarts with what it had; a state file that cannot be read is an error.
Without it the state lives in memory.`,
		Example: `  connhost sandbox --listen 127.0.0.1:8080
  connhost sandbox --json --state ./.connhost/sandbox`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sb, err := startSandbox(cmd.Context(), listen, state, k.Logger())
			if err != nil {
				return err
			}
			defer sb.Close()
			if k.JSON() {
				writeJSONLine(k.Stdout(), map[string]string{"payments": sb.PaymentsURL(), "email": sb.EmailURL()})
			} else {
				fmt.Fprintf(k.Stdout(), "payments  %s\nemail     %s\nCtrl-C stops the sandbox.\n", sb.PaymentsURL(), sb.EmailURL())
			}
			<-cmd.Context().Done()
			return nil
		},
	}
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address of the payments emulator; email listens on the next port (port 0: free ports)")
	c.Flags().StringVar(&state, "state", "", "directory that keeps the emulators' state across restarts (default: memory only)")
	return c
}
