// Package manifests parses and validates connector manifests (TOML) and
// holds the manifests shipped with connhost (email.toml, payments.toml).
//
// A manifest declares what a connector module is (name, version, ABI,
// pinned module digest), what it may reach (HTTP allowlist, config keys),
// its limits, and per operation: effect class, recovery policy, approval
// requirement, attempt cap and the JSON Schema of its arguments.
//
// The [provider] table says what the connector's provider guarantees
// (its idempotency key and how long it keeps it) and, in search, where an
// operator looks for a call whose outcome is unknown: an http(s) URL
// template with the placeholders {execution_id} and {key} only, kept out
// of the scheme and host, checked at load and filled by
// Provider.SearchURL, e.g.
//
//	[provider]
//	name = "Stripe"
//	search = "https://dashboard.stripe.com/search?query=metadata%5Bconnhost_execution_id%5D%3A{execution_id}"
package manifests

import (
	"slices"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Policy is an operation's declared recovery policy: what the host may do
// when a call's outcome is unknown after a crash.
type Policy string

// Recovery policies.
const (
	// PolicyManual: an uncertain call becomes recovery_required and waits
	// for an operator.
	PolicyManual Policy = "manual"
	// PolicyIdempotentRetry: an uncertain call is re-dispatched through
	// execute_with_key with the same key; the provider deduplicates.
	PolicyIdempotentRetry Policy = "idempotent-retry"
	// PolicyReconcile: the host asks the connector's reconcile export
	// whether the call took effect.
	PolicyReconcile Policy = "reconcile"
)

// Durability says when a succeeded outcome is durable relative to the
// answer a runtime gets.
type Durability string

// Outcome durabilities.
const (
	// DurabilitySync: the outcome is synced to the ledger before the
	// answer is returned.
	DurabilitySync Durability = "sync"
	// DurabilityLazy: a succeeded outcome is written before the answer is
	// returned and synced within milliseconds (the next group commit or
	// the ledger's background sync). A crash in between loses it, and
	// recovery re-derives the same outcome: the provider replays the keyed
	// answer (idempotent-retry, within its key retention) or reconcile
	// finds the effect. Only those two policies may declare it.
	DurabilityLazy Durability = "lazy"
)

// Effect says whether an operation changes the outside world.
type Effect string

// Effect classes.
const (
	// EffectExternal: the operation has side effects outside connhost.
	EffectExternal Effect = "external"
	// EffectRead: the operation only reads; it never needs recovery and
	// may always be re-executed.
	EffectRead Effect = "read"
)

// Manifest is a parsed, validated connector manifest.
type Manifest struct {
	// Path is the file the manifest was loaded from ("" when parsed from
	// bytes without a name).
	Path string
	// Digest is the hex sha256 of the manifest file's bytes. Intents record
	// it so an audit can tell which manifest authorised a call.
	Digest string

	Connector    Connector
	Capabilities Capabilities
	Limits       Limits
	Provider     Provider
	Operations   []*Operation

	text *fileText // the parsed text, for line look-ups (nil when built by hand)
}

// Provider is the [provider] table: what the connector's provider
// guarantees, declared by the author and reviewed with the rest of the
// manifest. The audit reads it to tell whether a policy rests on a
// promise someone wrote down; the host bounds re-dispatches by it.
type Provider struct {
	// Name names the provider for people ("" when not declared).
	Name string
	// IdempotencyHeader is the request header by which the provider
	// deduplicates requests, e.g. "Idempotency-Key": a request repeated
	// with the same key gets the first request's answer and applies
	// nothing again. "" when the manifest declares none.
	IdempotencyHeader string
	// IdempotencyField is the request body field by which the provider
	// deduplicates instead (a JSON body's field, nested ones joined by
	// dots: "external_id"; a form body's field as sent), e.g. a provider
	// that refuses or replays a second object with the same external id.
	// At most one of IdempotencyHeader and IdempotencyField is set.
	IdempotencyField string
	// IdempotencyRetention is how long the provider remembers a key;
	// required with IdempotencyHeader or IdempotencyField. An uncertain idempotent-retry call
	// older than this is not re-dispatched (see host.Options.KeyRetention,
	// which bounds it too).
	IdempotencyRetention time.Duration
	// Search is where an operator looks for a call at the provider, when
	// its outcome is unknown (provider.search): an http(s) URL template
	// whose only placeholders are {execution_id} and {key} (the
	// idempotency key the connector was handed), e.g. Stripe's dashboard
	// search by the metadata the connector writes. The console links a
	// recovery_required call to it (SearchURL). "" when the manifest
	// declares none.
	Search string
}

// IdempotencyKey names where the provider reads the key it
// deduplicates by, for people: "header Idempotency-Key", "body field
// external_id", or "" when the manifest declares neither.
func (p Provider) IdempotencyKey() string {
	switch {
	case p.IdempotencyHeader != "":
		return "header " + p.IdempotencyHeader
	case p.IdempotencyField != "":
		return "body field " + p.IdempotencyField
	}
	return ""
}

// Connector is the [connector] table.
type Connector struct {
	Name    string
	Version string
	// ABI is the ABI version the module implements; it must equal
	// abi.Version.
	ABI int
	// Module is the module file name, resolved against a module directory
	// (see Manifest.ModulePath).
	Module string
	// SHA256 is the pinned hex sha256 of the module; "" means unpinned,
	// which the host refuses to load unless explicitly allowed.
	SHA256 string
}

// Capabilities is the [capabilities] table.
type Capabilities struct {
	// HTTP lists the only origins the module may reach, each
	// "scheme://host:port" (scheme http or https, explicit port).
	HTTP []string
	// Config lists the config keys the host may hand to the module. Each
	// key is required (the host refuses to open without a value for it)
	// unless ConfigOptional lists it too.
	Config []string
	// ConfigOptional lists the keys of Config the connector works without
	// (capabilities.config_optional), e.g. a base URL with a production
	// default. Every one must also be in Config.
	ConfigOptional []string
}

// RequiredConfig returns the keys of Config that ConfigOptional does not
// list, in declaration order: the host must have a value for each before
// it runs a call.
func (c Capabilities) RequiredConfig() []string {
	var out []string
	for _, k := range c.Config {
		if !slices.Contains(c.ConfigOptional, k) {
			out = append(out, k)
		}
	}
	return out
}

// Limits is the [limits] table. Zero values are replaced by defaults.
type Limits struct {
	// MemoryMiB caps the module's linear memory. The default value is 64.
	MemoryMiB int
	// Timeout is the deadline of one call. The default value is 15s.
	Timeout time.Duration
	// MaxOutputKiB caps the outcome envelope a call may return. The default
	// value is 256.
	MaxOutputKiB int
	// Instances caps the pool of warm instances. The default value is 4.
	Instances int
	// LogKiB caps the bytes of log messages one call may write through the
	// log host function; the record that crosses it is cut and later ones
	// are dropped and counted. It bounds what a looping connector can put
	// in the host's log. The default value is 64.
	LogKiB int
	// LogRecords caps the log records of one call; later records are
	// dropped and counted. The default value is 256.
	LogRecords int
}

// Operation is one [[operation]] entry.
type Operation struct {
	Name        string
	Description string
	Effect      Effect
	// Recovery is required for external operations. A read operation may
	// omit it (Recovery is then "": the host re-executes an uncertain read,
	// which has no effect to duplicate) or declare PolicyManual to make an
	// uncertain read wait for an operator; idempotent-retry and reconcile
	// are refused on reads.
	Recovery Policy
	// RequiresApproval parks new calls in awaiting_approval until a
	// reviewer approves the exact arguments.
	RequiresApproval bool
	// ApprovalTTL bounds how long an approval request stays open. The
	// default value is 1h.
	ApprovalTTL time.Duration
	// MaxAttempts caps dispatches of one execution. The default value is 3.
	MaxAttempts int
	// ReconcileSettle is how long after an attempt was dispatched its
	// request may still take effect at the provider (recovery "reconcile"
	// only). Until then a reconcile answer of not_applied is not taken as
	// evidence: the host waits and asks again, because re-dispatching
	// would race a request still in flight. Declare "0s" where the
	// re-dispatch itself cannot duplicate an in-flight request (it carries
	// an idempotency key the provider honours); where no re-dispatch
	// follows (no attempts left, or a cancel) the host then still waits
	// the default before it answers failed or cancelled. The default value
	// is twice limits.timeout: the attempt's deadline, and as long again
	// for a provider that goes on after the host stopped waiting.
	ReconcileSettle time.Duration
	// OutcomeDurability says whether a succeeded outcome is synced before
	// the answer (sync) or within milliseconds after it (lazy: one fsync
	// per execution instead of two). The default value is lazy for
	// idempotent-retry and reconcile, whose recovery re-derives a lost
	// outcome, and sync for everything else; lazy is refused elsewhere.
	OutcomeDurability Durability
	// InputSchema is the JSON Schema text of the arguments.
	InputSchema string
	// Review names the arguments a reviewer decides on (operation key
	// review): the approval view shows them first, in this order, and
	// then every other argument. A path names a property of the input
	// schema, nested object properties joined by "." ("shipping.city").
	// The default value (none) shows every argument in path order.
	Review []string
	// Money lists the arguments that are money amounts in minor units,
	// each with the argument naming its currency (operation key money,
	// an array of { amount = "…", currency = "…" }). The approval view
	// shows them in major units with the currency as well.
	Money []Money
	// DuplicateWindow turns on the duplicate-intent guard (operation key
	// duplicate_window, external operations only): a new call whose
	// canonical arguments equal those of a call of the same operation in
	// the same session and namespace, created within the window before it
	// and succeeded or still in flight, is not dispatched; OnDuplicate
	// says what happens to it instead. A runtime that re-issues a call
	// under a new tool-call id after a lost answer is the case it is for.
	// The default value (0) guards nothing.
	DuplicateWindow time.Duration
	// OnDuplicate is what the guard does with a repeat: DuplicateHold
	// (the default whenever DuplicateWindow is set) or DuplicateAnswer.
	// "" when DuplicateWindow is 0.
	OnDuplicate DuplicateAction
	// Intent names the arguments the guard compares, and how (operation
	// key intent, a table of path = kind, with duplicate_window only):
	// a call whose intent equals a recent one's is a repeat however its
	// other arguments differ (see IntentDigest). Sorted by path. The
	// default value (none) compares every argument as IntentText.
	Intent []IntentField
	// Line is the line of the [[operation]] header in the manifest file.
	Line int

	text  *fileText // the manifest's text (nil when built by hand)
	table string    // the operation's table path in text, "operation#i"

	schema    *jsonschema.Schema
	connector string   // Connector.Name of the manifest, for PolicyVersion
	version   string   // Connector.Version of the manifest, for PolicyVersion
	provider  Provider // the manifest's [provider], for PolicyVersion
}
