package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	internalcrashtest "github.com/connhost/connhost/devkit/crashtest"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/host/crashtest"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// The providers crashtest can stand in for with its in-process emulators.
const (
	providerPayments = "payments" // the Stripe API subset
	providerEmail    = "email"    // the Mailpit API subset
)

// crashtestUnused are the global flags crashtest does not read (every cell
// runs in a data directory, manifest copy and config of its own), with
// what to do instead.
var crashtestUnused = []struct{ flag, why string }{
	{"config", "every cell gets a connhost.toml of its own; give config values with --set KEY=VALUE, secrets with --set-env KEY=VAR"},
	{"data", "every cell runs in a fresh data directory"},
	{"manifests", "the connector's manifest is --manifest"},
	{"init", "every cell starts a new ledger"},
}

func (k *kit) crashtestCommand() *cobra.Command {
	var manifest, operation, args, provider, providerURL, probeURL, probeFile, urlKey, module, variant string
	var recordProof bool
	var sets, setEnvs, points []string
	c := &cobra.Command{
		Use:   "crashtest --manifest FILE (--provider-url URL [--probe FILE | --probe-url URL] [--set KEY=VALUE]... [--set-env KEY=VAR]... [--module FILE] | --provider payments|email) [--operation X] [--point P]... [--variant gated|ungated] [--args JSON]",
		Short: "Kill connhost at every crash point and check the provider saw no duplicate",
		Long: `crashtest runs the fault-injection matrix for a connector: for each crash
point it starts a real connhost process with CONNHOST_CRASH_AT set, lets it
die, restarts it on the same data directory and checks what the provider
saw against the operation's declared recovery policy. It exits 3 when a
policy's promise is broken; each failing cell names the provider it ran
against and the connector's own error.

Every crash point × operation × approval variant (requires_approval on and
off; reads ungated only) runs in a fresh data directory, with this binary
as the connhost it kills. The connector's module comes from --modules
(built from plugins/<connector> when missing); an unpinned manifest is
pinned to that module in a temporary copy.

The provider is the connector's own test provider, named with
--provider-url: it is handed to the connector as base_url (--url-key names
another config key) and allowed the way a deployment's allow_http does;
--set gives other config values, --set-env KEY=VAR one from the
environment variable VAR (a token: it stays off the command line and out
of every file).

How the matrix observes the provider: with --probe FILE, a probe config
(by convention manifests/<connector>.probe.toml) describes the provider's
own API per operation, and crashtest puts a proxy in front of the
provider, which the connector is handed instead:

  [operation.create_item]
  hold    = "POST /api/items"               the request the in-flight row holds
  args    = '{"name": "crashtest {unique}"}'  sample arguments
  receipt = "GET /api/items/{receipt}"      2xx: exists, 404: does not; and the
                                            receipt must be named by a hold request
                                            of the cell (path or 2xx answer)
  effects = { count = "GET /api/items", json = "total" }
            (or answers = "POST /api/items": 2xx answers the proxy saw;
             removes = true for a delete; setup = {request, body} fills
             {setup.PATH} in args; see host/crashtest.LoadProbeConfig)

Without --probe, the provider answers the matrix's questions itself under
--probe-url (default: the provider URL + /_crashtest):

  GET  /effects            {"effects": N}   effects applied so far (required)
  GET  /receipts/{r}       {"exists": bool} (optional: receipts checked)
  GET  /args/{operation}   sample arguments (optional: else --args)
  POST /hold {"operation"} hold its next request, received, not applied
  GET  /held               {"held": N}
  POST /release            let held requests take effect; optionally
                           answers {"answers": [status]} once they were
                           (hold, held, release optional: the in-flight row)

Besides the crash points, every external operation gets the rows
in_flight (the provider holds the request while the host is killed; with
a provider that can hold) and equal_args: two calls of one session with
different tool-call ids and equal arguments, no crash. Each must make an
effect of its own (a key derived from the arguments, or a provider that
deduplicates by an argument, merges them), unless the manifest's
duplicate_window answers the second with the first's outcome. Against
the Stripe emulator (--provider payments), whose clock moves, every
idempotent-retry operation also gets key_kept and key_expired: the
process is killed after the connector returned, the emulator's and the
host's clocks move just short of, or just past, the key retention the
manifest declares ([provider] idempotency_retention, at most 24h), and
the call must end with its one effect: the key re-sent and replayed, or
past the retention never re-sent (reconcile finds the effect, or an
operator decides). With --probe, every idempotent-retry operation of a
manifest whose [provider] names the key the provider deduplicates by
(idempotency_header, or idempotency_field: a body field) gets provider_key:
after one call, the proxy sends its request again as it was (no second
effect allowed) and with that key changed (one effect wanted), proving the
claim; --record-proof then writes <name>.proof.json next to the manifest,
which connhost audit reads (without it, the claim is provider-key-unproven).
The summary counts each way a cell fails: duplicates,
lost calls, calls answered failed whose effect exists, succeeded without
an effect, effects undone, receipts naming another object.

Before the first cell every operation runs once without a crash: when one
does not succeed (a refused token, a wrong URL), crashtest stops with the
connector's error instead of running every cell into it. --operation,
--point (repeatable; the points of crashtest.Points, in_flight,
equal_args, key_kept, key_expired, provider_key) and --variant re-run one
cell.

The shipped connectors may run against connhost's own emulators instead:
--provider payments (the Stripe API subset) or email (Mailpit); a manifest
that reaches api.stripe.com, or Mailpit's default 127.0.0.1:8025, gets its
emulator without the flag. Any other connector needs --provider-url:
crashtest never wires a connector to an unrelated emulator.

The shipped operations have built-in sample arguments; give others with
--args (for --operation, or for every operation without a sample). Progress
(cells done/total) goes to stderr, also when it is not a terminal. "kills
survived" counts processes: an after_reconcile_return cell kills one after
the connector returned and another after reconcile answered (a read, which
has no reconcile, only the first, and is n/a).`,
		Example: `  connhost crashtest --manifest manifests/payments.toml
  connhost crashtest --manifest manifests/email.toml --operation send --json
  connhost crashtest --manifest manifests/payments.toml --operation create_payment \
      --args '{"amount":100,"currency":"eur","payment_method":"pm_card_visa"}'
  connhost crashtest --manifest manifests/webhook.toml --provider-url http://127.0.0.1:9090 \
      --probe manifests/webhook.probe.toml
  connhost crashtest --manifest manifests/pocketbase.toml --provider-url http://127.0.0.1:8090 \
      --probe manifests/pocketbase.probe.toml --set-env token=PB_TOKEN \
      --operation create_item --point in_flight --variant ungated`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			for _, u := range crashtestUnused {
				if cmd.Flags().Changed(u.flag) {
					return cli.Usagef("crashtest does not use --%s: %s", u.flag, u.why)
				}
			}
			fl := cmd.Flags()
			switch {
			case providerURL == "" && (fl.Changed("probe-url") || fl.Changed("probe") || fl.Changed("set") || fl.Changed("set-env") ||
				fl.Changed("url-key") || fl.Changed("module")):
				return cli.Usagef("--probe, --probe-url, --set, --set-env, --url-key and --module apply to a connector's own provider: give --provider-url")
			case providerURL != "" && provider != "":
				return cli.Usagef("--provider (a built-in emulator) and --provider-url (your provider) exclude each other")
			case probeFile != "" && probeURL != "":
				return cli.Usagef("--probe (a probe config, for a provider without a probe contract) and --probe-url (the provider's probe contract) exclude each other")
			case recordProof && probeFile == "":
				return cli.Usagef("--record-proof proves the manifest's [provider] claim by repeating the connector's requests through the probe's proxy: give --probe (and --provider-url)")
			}
			for _, p := range points {
				if !slices.Contains(crashtest.Rows(), p) && !slices.Contains(crashtest.Points(), p) {
					return cli.Usagef("--point %q: not a crash point (known: %s, %s)", p, strings.Join(crashtest.Points(), ", "), strings.Join(crashtest.Rows(), ", "))
				}
			}
			var variants []bool
			switch variant {
			case "":
			case "gated":
				variants = []bool{true}
			case "ungated":
				variants = []bool{false}
			default:
				return cli.Usagef("--variant %q: want gated (requires_approval on) or ungated", variant)
			}
			m, err := manifests.Load(manifest)
			if err != nil {
				return err
			}
			if operation != "" {
				if _, ok := m.Operation(operation); !ok {
					return cli.Usagef("--operation: connector %s has no operation %q", m.Connector.Name, operation)
				}
			}
			var given json.RawMessage
			if args != "" {
				raw, err := k.ReadArg(args)
				if err != nil {
					return cli.Usagef("--args: %v", err)
				}
				if !json.Valid(raw) {
					return cli.Usagef("--args is not valid JSON")
				}
				given = raw
			}
			values := map[string]string{}
			for _, kv := range sets {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return cli.Usagef("--set %q: want KEY=VALUE", kv)
				}
				values[k] = v
			}
			envs := map[string]string{}
			for _, kv := range setEnvs {
				k, v, ok := strings.Cut(kv, "=")
				switch {
				case !ok || k == "" || v == "":
					return cli.Usagef("--set-env %q: want KEY=VAR (the config key, and the environment variable holding its value)", kv)
				case values[k] != "" || k == urlKey:
					return cli.Usagef("--set-env %s: the config key is given by --set or --url-key too", k)
				}
				if _, set := os.LookupEnv(v); !set {
					return cli.Usagef("--set-env %s=%s: environment variable %s is not set", k, v, v)
				}
				envs[k] = v
			}
			if providerURL != "" {
				for _, k := range append(append([]string{urlKey}, slices.Sorted(maps.Keys(values))...), slices.Sorted(maps.Keys(envs))...) {
					if !slices.Contains(m.Capabilities.Config, k) {
						return cli.Usagef("connector %s does not declare config key %q (capabilities.config: %s)",
							m.Connector.Name, k, cli.OrDash(strings.Join(m.Capabilities.Config, ", ")))
					}
				}
			}
			if providerURL == "" {
				if provider == "" {
					provider = providerFor(m)
				}
				switch provider {
				case providerPayments, providerEmail:
				case "":
					return cli.Usagef("connector %s reaches %s, which no built-in emulator serves: run its test provider and name it with --provider-url URL (it answers the probe contract, see connhost crashtest --help)",
						m.Connector.Name, cli.OrDash(strings.Join(m.Capabilities.HTTP, ", ")))
				default:
					return cli.Usagef("--provider must be %s or %s (or give your provider with --provider-url)", providerPayments, providerEmail)
				}
			}
			if module == "" {
				if err := k.buildMissing(ctx, []*manifests.Manifest{m}); err != nil {
					return err
				}
				module = m.ModulePath(k.Modules())
			} else if d, err := wasmbuild.FileDigest(module); err != nil {
				return cli.Usagef("--module: %v", err)
			} else if m.Connector.SHA256 != "" && d != m.Connector.SHA256 {
				fmt.Fprintf(k.Stderr(), "note: %s pins sha256 %s; the cells run %s (sha256 %s) in copies pinned to it\n",
					m.Path, m.Connector.SHA256[:12], module, d[:12])
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("crashtest: find own binary: %w", err)
			}
			progress, done := k.crashtestProgress()
			defer done()
			sel := cellSelection{operation: operation, points: points, variants: variants}
			var rep crashtest.Report
			if providerURL != "" {
				own := ownProvider{url: providerURL, probeURL: probeURL, urlKey: urlKey, values: values, env: envs}
				if probeFile != "" {
					if own.probe, err = crashtest.LoadProbeConfig(probeFile, nil); err != nil {
						return err
					}
				} else if own.probeURL == "" {
					own.probeURL = strings.TrimSuffix(providerURL, "/") + "/_crashtest"
				}
				rep, err = k.runOwnProviderCrashtest(ctx, m, self, module, own, sel, given, progress)
			} else {
				rep, err = k.runCrashtest(ctx, m, self, provider, sel, given, progress)
			}
			done()
			if err != nil {
				return err
			}
			if k.JSON() {
				cli.WriteJSON(k.Stdout(), rep)
			} else if err := rep.WriteTable(k.Stdout()); err != nil {
				return err
			}
			if recordProof {
				if err := k.recordProof(m, providerURL, rep); err != nil {
					return err
				}
			}
			if !rep.OK() {
				if !k.JSON() {
					fmt.Fprintf(k.Stderr(), "connhost: crashtest: %d cell(s) break the declared recovery policy\n", rep.Totals.Failed)
				}
				return &cli.ExitError{Code: cli.ExitFindings}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&manifest, "manifest", "", "the connector's manifest (required)")
	f.StringVar(&operation, "operation", "", "only this operation")
	f.StringVar(&args, "args", "", "sample arguments (JSON or @file) for --operation, or for operations without built-in ones")
	f.StringVar(&provider, "provider", "", "a built-in emulator for the shipped connectors: payments or email (default: from the manifest's http allowlist)")
	f.StringVar(&providerURL, "provider-url", "", "the connector's own test provider, handed to it as base_url")
	f.StringVar(&probeURL, "probe-url", "", "where the provider answers the probe contract (default: --provider-url + /_crashtest)")
	f.StringVar(&probeFile, "probe", "", "a probe config (manifests/<connector>.probe.toml) describing a provider without a probe contract")
	f.StringVar(&urlKey, "url-key", "base_url", "the config key that takes --provider-url")
	f.StringArrayVar(&sets, "set", nil, "another config value for the connector, KEY=VALUE (repeatable)")
	f.StringArrayVar(&setEnvs, "set-env", nil, "a config value from the environment, KEY=VAR: the value of $VAR, written nowhere (repeatable)")
	f.StringArrayVar(&points, "point", nil, "only this crash point, or row: in_flight, equal_args, key_kept, key_expired, provider_key (repeatable; default: every point and row)")
	f.StringVar(&variant, "variant", "", "only gated (requires_approval on) or ungated calls (default: both)")
	f.StringVar(&module, "module", "", "the connector's built module (default: its module in --modules, built from plugins/<connector> when missing)")
	f.BoolVar(&recordProof, "record-proof", false, "when every provider_key row passed, record the proof of the manifest's [provider] claim next to it (<name>.proof.json), where connhost audit reads it; when one failed, remove an earlier proof")
	_ = c.MarkFlagRequired("manifest")
	return c
}

// recordProof writes the proof of m's [provider] claim next to it when
// the report's provider_key rows all passed, and removes an earlier proof
// of the claim when one failed: a claim a run disproved is no longer
// proven.
func (k *kit) recordProof(m *manifests.Manifest, providerURL string, rep crashtest.Report) error {
	path := audit.ProofPath(m.Path)
	var ops []string
	failed := false
	for _, r := range rep.Rows {
		if r.Point != crashtest.PointProviderKey {
			continue
		}
		if !r.Pass {
			failed = true
		} else if !slices.Contains(ops, r.Operation) {
			ops = append(ops, r.Operation)
		}
	}
	switch {
	case failed:
		if err := os.Remove(path); err == nil {
			fmt.Fprintf(k.Stderr(), "crashtest: the provider does not keep the [provider] claim; removed the earlier proof %s\n", path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("crashtest: %w", err)
		}
		return nil
	case len(ops) == 0:
		return cli.Usagef("--record-proof: no provider_key row ran: %s declares no key in [provider], has no idempotent-retry operation, or --point/--variant left the row out (it runs ungated)", m.Path)
	}
	proof := audit.ProviderProof{Connector: m.Connector.Name, IdempotencyHeader: m.Provider.IdempotencyHeader,
		IdempotencyField: m.Provider.IdempotencyField, Provider: providerURL, Operations: ops, ProvenAt: time.Now().UTC().Truncate(time.Second)}
	if err := audit.WriteProof(path, proof); err != nil {
		return err
	}
	fmt.Fprintf(k.Stderr(), "crashtest: the provider deduplicates by %s: recorded in %s (connhost audit reads it)\n", m.Provider.IdempotencyKey(), path)
	return nil
}

// crashtestProgress returns the progress callback of a run and a function
// that ends the progress display. On a terminal one line is rewritten; on
// anything else (a pipe, a file, CI) every cell gets a line of its own.
func (k *kit) crashtestProgress() (func(done, total int, r crashtest.Row), func()) {
	tty := k.IsTerminal(k.Stderr())
	var mu sync.Mutex
	ended := false
	progress := func(done, total int, r crashtest.Row) {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		res := "pass"
		switch {
		case !r.Pass:
			res = "FAIL"
		case !r.Reached:
			res = "n/a"
		}
		line := fmt.Sprintf("crashtest: [%d/%d] %s × %s gated=%t: %s", done, total, r.Point, r.Operation, r.Gated, res)
		if tty {
			fmt.Fprintf(k.Stderr(), "\r\033[K%s", line)
		} else {
			fmt.Fprintln(k.Stderr(), line)
		}
	}
	end := func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended && tty {
			fmt.Fprint(k.Stderr(), "\r\033[K")
		}
		ended = true
	}
	return progress, end
}

// providerFor picks a built-in emulator from what the manifest allowlists,
// or "" when none serves it.
func providerFor(m *manifests.Manifest) string {
	for _, o := range m.Capabilities.HTTP {
		switch {
		case o == "https://api.stripe.com:443":
			return providerPayments
		case o == "http://127.0.0.1:8025" || o == "http://localhost:8025":
			return providerEmail
		}
	}
	return ""
}

// argsFallback answers sample arguments from the provider, and --args for
// operations the provider has none for.
type argsFallback struct {
	crashtest.Provider
	given json.RawMessage
}

func (p argsFallback) Args(ctx context.Context, op string) (json.RawMessage, error) {
	a, err := p.Provider.Args(ctx, op)
	if errors.Is(err, crashtest.ErrUnsupported) && p.given != nil {
		return p.given, nil
	}
	return a, err
}

// cellSelection narrows the matrix to some cells (--operation, --point,
// --variant); its zero value runs them all.
type cellSelection struct {
	operation string
	points    []string
	variants  []bool
}

// ownProvider is a connector's own test provider and how the matrix
// observes it: a probe config, else the probe contract at probeURL.
type ownProvider struct {
	url, probeURL, urlKey string
	probe                 *crashtest.ProbeConfig
	values, env           map[string]string
}

// runOwnProviderCrashtest runs the matrix against the connector's own test
// provider, observed through a probe config or its probe endpoints.
func (k *kit) runOwnProviderCrashtest(ctx context.Context, m *manifests.Manifest, binary, module string, own ownProvider,
	sel cellSelection, given json.RawMessage, progress func(int, int, crashtest.Row)) (crashtest.Report, error) {
	o := crashtest.Options{
		Binary:       binary,
		Manifest:     m.Path,
		Module:       module,
		ProviderURL:  own.url,
		URLKey:       own.urlKey,
		Config:       own.values,
		ConfigEnv:    own.env,
		ProviderName: own.url,
		Progress:     progress,
		Points:       sel.points,
		Variants:     sel.variants,
	}
	var probe crashtest.Provider
	if own.probe != nil {
		o.ProbeConfig = own.probe
	} else {
		probe = crashtest.NewProbe(own.probeURL)
		o.Provider = argsFallback{Provider: probe}
	}
	if sel.operation != "" {
		o.Operations = []string{sel.operation}
		if given != nil {
			o.Args = map[string]json.RawMessage{sel.operation: given}
		}
	} else if given != nil {
		if probe != nil {
			o.Provider = argsFallback{Provider: probe, given: given}
		} else {
			// --args stands in for the operations the probe config gives
			// no arguments.
			o.Args = map[string]json.RawMessage{}
			for _, op := range m.Operations {
				if po := own.probe.Operations[op.Name]; po == nil || po.Args == "" {
					o.Args[op.Name] = given
				}
			}
		}
	}
	// Run's errors say "crashtest: …" themselves.
	return crashtest.Run(ctx, o)
}

// runCrashtest starts the emulators, writes a connhost.toml pointing the
// connector at its emulator and runs the matrix.
func (k *kit) runCrashtest(ctx context.Context, m *manifests.Manifest, binary, provider string, sel cellSelection, given json.RawMessage,
	progress func(int, int, crashtest.Row)) (crashtest.Report, error) {
	operation := sel.operation
	sb, err := sandbox.Start(ctx, sandbox.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		return crashtest.Report{}, fmt.Errorf("crashtest: start provider emulators: %w", err)
	}
	defer sb.Close()
	work, err := os.MkdirTemp("", "connhost-crashtest-")
	if err != nil {
		return crashtest.Report{}, fmt.Errorf("crashtest: %w", err)
	}
	defer os.RemoveAll(work)

	cfg := map[string]string{"base_url": sb.EmailURL()}
	if provider == providerPayments {
		cfg = map[string]string{"base_url": sb.PaymentsURL(), "api_key": sandbox.DefaultAPIKey}
	}
	for k := range cfg {
		if !slices.Contains(m.Capabilities.Config, k) {
			delete(cfg, k)
		}
	}
	cfgPath := filepath.Join(work, "connhost.toml")
	if err := internalcrashtest.WriteConfig(cfgPath, map[string]map[string]string{m.Connector.Name: cfg}); err != nil {
		return crashtest.Report{}, fmt.Errorf("crashtest: %w", err)
	}
	prov := internalcrashtest.NewProvider(sb.PaymentsURL(), sb.EmailURL())
	name := "connhost's Mailpit emulator at " + sb.EmailURL()
	if provider == providerPayments {
		name = "connhost's Stripe emulator at " + sb.PaymentsURL()
	}
	o := internalcrashtest.Options{
		ProviderName: name,
		OnCell:       progress,
		Binary:       binary,
		Manifest:     m.Path,
		Modules:      k.Modules(),
		Config:       cfgPath,
		Effects:      prov.Effects,
		CheckReceipt: prov.CheckReceipt,
		Receipts:     prov,
		Hold:         prov,
		WorkDir:      work,
		Points:       sel.points,
		Variants:     sel.variants,
		Preflight:    true,
		Args: func(ctx context.Context, op string) (json.RawMessage, error) {
			if given != nil && (operation == "" || op == operation) {
				if sample, err := prov.Args(ctx, op); err == nil && operation == "" {
					return sample, nil // --args is for operations without defaults
				}
				return given, nil
			}
			return prov.Args(ctx, op)
		},
	}
	if operation != "" {
		o.Operations = []string{operation}
	}
	if provider == providerPayments {
		o.Clock = prov // the Stripe emulator's clock expires its keys
	}
	return internalcrashtest.Run(ctx, o)
}
