// Package audit implements `connhost audit`: a policy review of connector
// manifests against what their modules really are and export, a diff of
// two versions of a manifest that flags risk changes, the waivers with
// which a reviewer accepts a finding, and the sign-off the host can demand
// before it runs a connector.
//
// The audit never loads modules itself: the caller hands it the facts about
// each module (found, digest, ABI, self-description) through a FactsFunc,
// so the package needs no wasm runtime.
//
// # Finding codes
//
// Every finding has a severity and a stable code; tools and CI scripts may
// match on codes, which never change meaning. Each finding names the line
// (and, inside an input schema, the column) of the key it is about.
//
//	code                                severity  raised when
//	manifest-invalid                    error     the manifest does not parse or breaks a rule (one finding per problem, with file:line; wildcard hosts land here)
//	duplicate-connector                 error     two audited manifests declare the same connector name
//	module-missing                      error     the module file was not found
//	module-invalid                      error     the module was found but could not be loaded or describe itself
//	digest-unpinned                     error     [connector].sha256 is empty: the host would refuse to load it
//	digest-mismatch                     error     the module's sha256 differs from the pinned one
//	abi-mismatch                        error     the module implements another ABI version than the manifest declares
//	export-missing                      error     a declared operation is not in the module, idempotent-retry lacks execute_with_key, or reconcile lacks reconcile
//	read-exports-recovery               error     an operation declared effect "read" whose module exports execute_with_key or reconcile for it: it has an effect to deduplicate or find, and recovery would re-execute it blindly
//	metadata-host                       error     an allowlisted origin is a cloud metadata service (169.254.169.254, fd00:ec2::254, metadata.google.internal, …)
//	secret-in-manifest                  error     the manifest text holds a credential (sk_live_/sk_test_ keys, a PEM private key, a cloud access key, …)
//	waiver-invalid                      error     a waiver file does not parse, or waives an error (errors cannot be waived)
//	signoff-invalid                     error     a sign-off file does not parse or names another connector
//	undeclared-operation                warning   the module implements an operation the manifest does not declare (the host never exposes it)
//	external-no-approval-auto-recovery  warning   an external operation without approval whose uncertain calls are re-driven automatically (idempotent-retry or reconcile)
//	manual-without-approval             warning   an external operation with recovery manual and no approval: an operator decides after the fact what nobody approved before
//	read-sounds-external                warning   an operation declared effect "read" whose name or description says it creates, sends, charges, deletes, …
//	plain-http-host                     warning   an http:// origin to a non-loopback host: requests and secrets travel in clear
//	loopback-host                       warning   an origin on a loopback address: fine for emulators, not for a deployment
//	internal-host                       warning   an origin on a private, link-local, unspecified or otherwise internal address (the host's own internal-address table)
//	idempotency-unknown-provider        warning   an idempotent-retry operation whose hosts are neither in KnownIdempotencyProviders nor covered by a [provider] idempotency declaration
//	provider-key-unproven               warning   [provider] declares the key an idempotent-retry operation rests on (a header or a body field), and no connhost crashtest proof next to the manifest (<name>.proof.json) covers it; a known provider's Idempotency-Key needs none
//	missing-description                 warning   an operation's description is too short (< MinDescriptionLen) to guide the model
//	permissive-schema                   warning   an input schema, or an object nested in it, accepts any object (no properties, additionalProperties not false) or undeclared properties beside its own; one declaring none and allowing none accepts only {} and passes
//	unbounded-amount                    warning   a money or amount field (amount, price, total, fee, …) of the input schema without a minimum and a maximum
//	unbounded-string                    warning   a string argument (nested ones included) without a maxLength, enum or const, in an operation a reviewer approves (requires_approval, or duplicate_window holding repeats): its calls can outgrow what an approval dialog shows whole
//	approval-ttl-long                   warning   approval_ttl is longer than Options.MaxApprovalTTL (default 24h): an approval outlives the reviewer's context
//	secret-like-token                   warning   a long high-entropy token in the manifest text, which may be a credential
//	high-attempts                       info      an external operation may be dispatched more than HighAttempts times
//	http-empty                          info      a connector with an external operation allowlists no origin (capabilities.http empty): it reaches only what a deployment adds with allow_http, so the audit cannot name its provider
//	approval-ttl-ignored                info      approval_ttl differs from the default on an operation that requires no approval
//	module-not-checked                  info      no module facts were available (FactsFunc nil): module checks were skipped
//	waiver-stale                        info      a waiver was given for another version of the manifest (other content than its module pin; for a finding about the module, another digest): it no longer applies
//	waiver-unused                       info      a waiver for this version of the manifest matches no finding
//	signoff-stale                       info      the connector was signed off, but its manifest or module changed since
//
// A waiver (see Waiver) accepts one warning or info finding of one manifest
// version: the finding stays in the report, marked waived, and no longer
// fails the audit.
//
// Diff change codes are listed on Diff.
package audit

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/ipclass"
	"github.com/connhost/connhost/manifests"
)

// Severity ranks a finding or a change.
type Severity string

// Severities, most severe first.
const (
	// SeverityError fails the audit; it cannot be waived.
	SeverityError Severity = "error"
	// SeverityWarning fails the audit with --strict, and a sign-off,
	// unless waived.
	SeverityWarning Severity = "warning"
	// SeverityInfo never fails the audit.
	SeverityInfo Severity = "info"
)

func (s Severity) rank() int {
	switch s {
	case SeverityError:
		return 0
	case SeverityWarning:
		return 1
	}
	return 2
}

// Code is a stable finding or change code (see the package documentation).
type Code string

// Finding codes. The table in the package documentation says when each is
// raised.
const (
	CodeManifestInvalid                Code = "manifest-invalid"
	CodeDuplicateConnector             Code = "duplicate-connector"
	CodeModuleMissing                  Code = "module-missing"
	CodeModuleInvalid                  Code = "module-invalid"
	CodeDigestUnpinned                 Code = "digest-unpinned"
	CodeDigestMismatch                 Code = "digest-mismatch"
	CodeABIMismatch                    Code = "abi-mismatch"
	CodeExportMissing                  Code = "export-missing"
	CodeReadExportsRecovery            Code = "read-exports-recovery"
	CodeMetadataHost                   Code = "metadata-host"
	CodeSecretInManifest               Code = "secret-in-manifest"
	CodeWaiverInvalid                  Code = "waiver-invalid"
	CodeSignoffInvalid                 Code = "signoff-invalid"
	CodeUndeclaredOperation            Code = "undeclared-operation"
	CodeExternalNoApprovalAutoRecovery Code = "external-no-approval-auto-recovery"
	CodeManualWithoutApproval          Code = "manual-without-approval"
	CodeReadSoundsExternal             Code = "read-sounds-external"
	CodePlainHTTPHost                  Code = "plain-http-host"
	CodeLoopbackHost                   Code = "loopback-host"
	CodeInternalHost                   Code = "internal-host"
	CodeIdempotencyUnknownProvider     Code = "idempotency-unknown-provider"
	CodeProviderKeyUnproven            Code = "provider-key-unproven"
	CodeMissingDescription             Code = "missing-description"
	CodePermissiveSchema               Code = "permissive-schema"
	CodeUnboundedAmount                Code = "unbounded-amount"
	CodeUnboundedString                Code = "unbounded-string"
	CodeApprovalTTLLong                Code = "approval-ttl-long"
	CodeSecretLikeToken                Code = "secret-like-token"
	CodeHighAttempts                   Code = "high-attempts"
	CodeHTTPEmpty                      Code = "http-empty"
	CodeApprovalTTLIgnored             Code = "approval-ttl-ignored"
	CodeModuleNotChecked               Code = "module-not-checked"
	CodeWaiverStale                    Code = "waiver-stale"
	CodeWaiverUnused                   Code = "waiver-unused"
	CodeSignoffStale                   Code = "signoff-stale"
)

// FindingCodes lists every finding code with its severity, in the order of
// the package documentation.
var FindingCodes = []struct {
	Code     Code
	Severity Severity
}{
	{CodeManifestInvalid, SeverityError},
	{CodeDuplicateConnector, SeverityError},
	{CodeModuleMissing, SeverityError},
	{CodeModuleInvalid, SeverityError},
	{CodeDigestUnpinned, SeverityError},
	{CodeDigestMismatch, SeverityError},
	{CodeABIMismatch, SeverityError},
	{CodeExportMissing, SeverityError},
	{CodeReadExportsRecovery, SeverityError},
	{CodeMetadataHost, SeverityError},
	{CodeSecretInManifest, SeverityError},
	{CodeWaiverInvalid, SeverityError},
	{CodeSignoffInvalid, SeverityError},
	{CodeUndeclaredOperation, SeverityWarning},
	{CodeExternalNoApprovalAutoRecovery, SeverityWarning},
	{CodeManualWithoutApproval, SeverityWarning},
	{CodeReadSoundsExternal, SeverityWarning},
	{CodePlainHTTPHost, SeverityWarning},
	{CodeLoopbackHost, SeverityWarning},
	{CodeInternalHost, SeverityWarning},
	{CodeIdempotencyUnknownProvider, SeverityWarning},
	{CodeProviderKeyUnproven, SeverityWarning},
	{CodeMissingDescription, SeverityWarning},
	{CodePermissiveSchema, SeverityWarning},
	{CodeUnboundedAmount, SeverityWarning},
	{CodeUnboundedString, SeverityWarning},
	{CodeApprovalTTLLong, SeverityWarning},
	{CodeSecretLikeToken, SeverityWarning},
	{CodeHighAttempts, SeverityInfo},
	{CodeHTTPEmpty, SeverityInfo},
	{CodeApprovalTTLIgnored, SeverityInfo},
	{CodeModuleNotChecked, SeverityInfo},
	{CodeWaiverStale, SeverityInfo},
	{CodeWaiverUnused, SeverityInfo},
	{CodeSignoffStale, SeverityInfo},
}

// severityOf returns the severity of a finding code ("" when unknown).
func severityOf(c Code) Severity {
	for _, fc := range FindingCodes {
		if fc.Code == c {
			return fc.Severity
		}
	}
	return ""
}

// KnownIdempotencyProviders lists the host names of providers known to
// honour an Idempotency-Key header (same key and parameters: the first
// response is replayed, no second effect). An idempotent-retry operation
// whose connector reaches any other host gets an idempotency-unknown-provider
// warning unless its manifest declares the provider's guarantee in
// [provider] (idempotency_header, idempotency_retention): then the policy
// rests on a promise written down for the reviewer, not on nothing.
//
//   - api.stripe.com: keys kept at least 24 h; replays set
//     Idempotent-Replayed: true; a key reused with other parameters is an
//     idempotency_error; an in-flight duplicate is a 409.
var KnownIdempotencyProviders = []string{
	"api.stripe.com",
}

// MinDescriptionLen is the shortest operation description that does not
// raise missing-description.
const MinDescriptionLen = 16

// HighAttempts is the attempt cap above which an external operation raises
// high-attempts.
const HighAttempts = 5

// DefaultMaxApprovalTTL is the default of Options.MaxApprovalTTL.
const DefaultMaxApprovalTTL = 24 * time.Hour

// Options configures an audit.
type Options struct {
	// Facts returns the facts about a manifest's module; it is called once
	// per audited manifest. The default value (nil) skips the module
	// checks, reported as module-not-checked.
	Facts FactsFunc
	// MaxApprovalTTL is the longest approval_ttl that raises no
	// approval-ttl-long. The default value is DefaultMaxApprovalTTL (24h).
	MaxApprovalTTL time.Duration
}

func (o *Options) ensureDefaults() {
	if o.MaxApprovalTTL <= 0 {
		o.MaxApprovalTTL = DefaultMaxApprovalTTL
	}
}

// ModuleFacts is what the caller found out about a connector's module.
type ModuleFacts struct {
	// Found: the module file exists.
	Found bool `json:"found"`
	// Path is where the module was looked for.
	Path string `json:"path,omitempty"`
	// ActualSHA256 is the hex sha256 of the module file ("" if not found).
	ActualSHA256 string `json:"actual_sha256,omitempty"`
	// ABI is what connhost_abi_version returned (0 if unknown).
	ABI int `json:"abi,omitempty"`
	// Description is the module's self-description (nil if unknown).
	Description *abi.Description `json:"description,omitempty"`
	// LoadError says why the module could not be compiled, instantiated or
	// described ("" if it could).
	LoadError string `json:"load_error,omitempty"`
}

// FactsFunc returns the facts about m's module. It is called once per
// audited manifest.
type FactsFunc func(m *manifests.Manifest) ModuleFacts

// Finding is one thing the audit reports.
type Finding struct {
	Severity Severity `json:"severity"`
	Code     Code     `json:"code"`
	// Connector and Operation say what the finding is about ("" when it is
	// about a file, or the whole connector).
	Connector string `json:"connector,omitempty"`
	Operation string `json:"operation,omitempty"`
	// File, Line and Column locate the finding: the line of the offending
	// key (Line 0: no line), and inside an input schema or for a syntax
	// error the column too (0: none).
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
	// Waived is the waiver that accepts this finding (nil: not waived).
	// A waived finding does not fail the audit or a sign-off.
	Waived *Waiver `json:"waived,omitempty"`
}

// Where formats the finding's location: "file:line[:column] connector/operation".
func (f Finding) Where() string {
	var parts []string
	if f.File != "" {
		loc := f.File
		if f.Line > 0 {
			loc += fmt.Sprintf(":%d", f.Line)
			if f.Column > 0 {
				loc += fmt.Sprintf(":%d", f.Column)
			}
		}
		parts = append(parts, loc)
	}
	if f.Connector != "" {
		s := f.Connector
		if f.Operation != "" {
			s += "/" + f.Operation
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// Report is the result of an audit.
type Report struct {
	// Connectors are the manifests that parsed, sorted by name.
	Connectors []ConnectorReport `json:"connectors"`
	// Findings are sorted by severity, file, connector, line, operation,
	// code.
	Findings []Finding `json:"findings"`
}

// ConnectorReport is what one manifest declares and what its module is.
type ConnectorReport struct {
	Name           string `json:"name"`
	Version        string `json:"version"`
	File           string `json:"file"`
	ManifestSHA256 string `json:"manifest_sha256"`
	// ReviewSHA256 is the manifest's review digest: its digest without
	// the module pin (manifests.Manifest.ReviewDigest), what a waiver is
	// given for.
	ReviewSHA256 string       `json:"review_sha256"`
	ABI          int          `json:"abi"`
	Module       ModuleReport `json:"module"`
	HTTP         []string     `json:"http"`
	Config       []string     `json:"config"`
	Limits       LimitsReport `json:"limits"`
	// Provider is the manifest's [provider] declaration (nil: none).
	Provider *ProviderReport `json:"provider,omitempty"`
	// Operations are in manifest order.
	Operations []OperationReport `json:"operations"`
	// Undeclared lists operations the module implements but the manifest
	// does not declare.
	Undeclared []string `json:"undeclared_operations"`
	// Signoff is the connector's sign-off status.
	Signoff SignoffStatus `json:"signoff"`
}

// ProviderReport is the [provider] table as declared.
type ProviderReport struct {
	Name                 string `json:"name,omitempty"`
	IdempotencyHeader    string `json:"idempotency_header,omitempty"`
	IdempotencyField     string `json:"idempotency_field,omitempty"`
	IdempotencyRetention string `json:"idempotency_retention,omitempty"`
	// Key says where the provider reads its key, for people ("header
	// Idempotency-Key", "body field external_id").
	Key  string `json:"idempotency_key,omitempty"`
	Line int    `json:"line,omitempty"`
	// Proof is the connhost crashtest proof of the claim (nil: none).
	Proof *ProviderProof `json:"proof,omitempty"`
}

// Digest statuses of ModuleReport.DigestStatus.
const (
	DigestMatch    = "match"
	DigestMismatch = "mismatch"
	DigestUnpinned = "unpinned"
	DigestUnknown  = "unknown" // module not found or not checked
)

// ModuleReport compares the declared module with the actual one.
type ModuleReport struct {
	File         string `json:"file"`
	Path         string `json:"path,omitempty"`
	Checked      bool   `json:"checked"`
	Found        bool   `json:"found"`
	PinnedSHA256 string `json:"pinned_sha256"`
	ActualSHA256 string `json:"actual_sha256"`
	DigestStatus string `json:"digest_status"`
	ABI          int    `json:"abi"`
	LoadError    string `json:"load_error,omitempty"`
}

// LimitsReport is the [limits] table with defaults applied.
type LimitsReport struct {
	MemoryMiB    int    `json:"memory_mib"`
	Timeout      string `json:"timeout"`
	MaxOutputKiB int    `json:"max_output_kib"`
	Instances    int    `json:"instances"`
}

// OperationReport is one operation's declared policy and its exports.
type OperationReport struct {
	Name             string `json:"name"`
	Line             int    `json:"line"`
	Description      string `json:"description"`
	Effect           string `json:"effect"`
	Recovery         string `json:"recovery"`
	RequiresApproval bool   `json:"requires_approval"`
	ApprovalTTL      string `json:"approval_ttl"`
	MaxAttempts      int    `json:"max_attempts"`
	// ReconcileSettle: for recovery "reconcile", how long after an
	// attempt's dispatch reconcile's not_applied becomes evidence.
	ReconcileSettle string `json:"reconcile_settle,omitempty"`
	// OutcomeDurability is "lazy" (a succeeded outcome synced within
	// milliseconds after the answer; recovery re-derives it if lost) or
	// "sync".
	OutcomeDurability string `json:"outcome_durability"`
	// DuplicateWindow and OnDuplicate are the duplicate-intent guard
	// (duplicate_window, on_duplicate: hold or answer); absent when the
	// operation has none.
	DuplicateWindow string `json:"duplicate_window,omitempty"`
	OnDuplicate     string `json:"on_duplicate,omitempty"`
	// Intent is what the guard compares (operation key intent): each
	// argument as "path" or "path (how)"; absent when the operation has
	// no guard or compares every argument.
	Intent []string `json:"intent,omitempty"`
	// Review lists the arguments the manifest names for review, shown
	// first in the approval view.
	Review        []string `json:"review,omitempty"`
	PolicyVersion string   `json:"policy_version"`
	// Exports is what the module implements for this operation; nil when
	// the module's description is unknown.
	Exports *Exports `json:"exports"`
	// Verdict is what the policy means for one call.
	Verdict Verdict `json:"verdict"`
}

// Exports says which entry points the module implements for an operation.
type Exports struct {
	// InModule: the module's description lists the operation.
	InModule       bool `json:"in_module"`
	Execute        bool `json:"execute"`
	ExecuteWithKey bool `json:"execute_with_key"`
	Reconcile      bool `json:"reconcile"`
}

// String lists the implemented entry points ("execute, reconcile"), or
// "absent".
func (e *Exports) String() string {
	if e == nil {
		return "unknown"
	}
	if !e.InModule {
		return "absent"
	}
	var s []string
	if e.Execute {
		s = append(s, "execute")
	}
	if e.ExecuteWithKey {
		s = append(s, "execute_with_key")
	}
	if e.Reconcile {
		s = append(s, "reconcile")
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Count returns the number of findings of severity s that are not waived.
func (r Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s && f.Waived == nil {
			n++
		}
	}
	return n
}

// Waived returns the number of waived findings.
func (r Report) Waived() int {
	n := 0
	for _, f := range r.Findings {
		if f.Waived != nil {
			n++
		}
	}
	return n
}

// Errors returns the error findings.
func (r Report) Errors() []Finding { return r.filter(SeverityError) }

// Warnings returns the warning findings that are not waived.
func (r Report) Warnings() []Finding { return r.filter(SeverityWarning) }

// Infos returns the info findings that are not waived.
func (r Report) Infos() []Finding { return r.filter(SeverityInfo) }

func (r Report) filter(s Severity) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Severity == s && f.Waived == nil {
			out = append(out, f)
		}
	}
	return out
}

// Failed reports whether `connhost audit` exits non-zero: on any error, and
// with strict also on any warning that is not waived.
func (r Report) Failed(strict bool) bool {
	return r.Count(SeverityError) > 0 || (strict && r.Count(SeverityWarning) > 0)
}

// AuditPaths loads the manifests named by paths (files, or directories
// whose *.toml files are all audited) and audits them. Manifests that do
// not parse are reported as manifest-invalid findings, one per problem with
// its file, line and column, instead of stopping the audit; unreadable
// paths are manifest-invalid findings too. The waivers and the sign-off
// kept next to each manifest (see WaiversPath, SignoffPath) are read.
func AuditPaths(paths []string, o Options) Report {
	var (
		ms      []*manifests.Manifest
		invalid []Finding
	)
	for _, p := range expand(paths, &invalid) {
		m, err := manifests.Load(p)
		if err != nil {
			invalid = append(invalid, invalidFindings(p, err)...)
			continue
		}
		ms = append(ms, m)
	}
	r := Audit(ms, o)
	r.Findings = append(r.Findings, invalid...)
	sortFindings(r.Findings)
	return r
}

// expand replaces directories by their *.toml files, sorted.
func expand(paths []string, invalid *[]Finding) []string {
	var out []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			*invalid = append(*invalid, Finding{Severity: SeverityError, Code: CodeManifestInvalid, File: p, Message: err.Error()})
			continue
		}
		if !fi.IsDir() {
			out = append(out, p)
			continue
		}
		files, _ := manifests.Files(p)
		if len(files) == 0 {
			*invalid = append(*invalid, Finding{Severity: SeverityError, Code: CodeManifestInvalid, File: p, Message: "directory holds no *.toml manifest"})
		}
		out = append(out, files...)
	}
	return out
}

// invalidFindings turns a manifests.Load error into findings.
func invalidFindings(path string, err error) []Finding {
	var ve *manifests.ValidationError
	if !errors.As(err, &ve) {
		return []Finding{{Severity: SeverityError, Code: CodeManifestInvalid, File: path, Message: err.Error()}}
	}
	out := make([]Finding, 0, len(ve.Problems))
	for _, p := range ve.Problems {
		msg := p.Msg
		if p.Field != "" {
			msg = p.Field + ": " + msg
		}
		out = append(out, Finding{Severity: SeverityError, Code: CodeManifestInvalid, File: ve.File, Line: p.Line, Column: p.Column, Message: msg})
	}
	return out
}

// Audit reviews parsed manifests against their modules' facts, applies
// the waivers kept next to each manifest file and reports its sign-off
// status (a manifest without a Path has neither).
func Audit(ms []*manifests.Manifest, o Options) Report {
	o.ensureDefaults()
	r := Report{Connectors: []ConnectorReport{}, Findings: []Finding{}}
	seen := map[string]string{}
	for _, m := range ms {
		if first, ok := seen[m.Connector.Name]; ok {
			r.Findings = append(r.Findings, Finding{
				Severity: SeverityError, Code: CodeDuplicateConnector, Connector: m.Connector.Name, File: m.Path,
				Line:    m.Line("connector.name"),
				Message: fmt.Sprintf("connector %q is also declared by %s", m.Connector.Name, first),
			})
			continue
		}
		seen[m.Connector.Name] = m.Path
		a := &auditor{m: m, o: &o}
		if o.Facts != nil {
			f := o.Facts(m)
			a.facts = &f
		}
		cr := a.run()
		a.review(&cr)
		r.Connectors = append(r.Connectors, cr)
		r.Findings = append(r.Findings, a.findings...)
	}
	slices.SortStableFunc(r.Connectors, func(a, b ConnectorReport) int { return cmp.Compare(a.Name, b.Name) })
	sortFindings(r.Findings)
	return r
}

func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(a.Severity.rank(), b.Severity.rank()),
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Connector, b.Connector),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Operation, b.Operation),
			cmp.Compare(a.Code, b.Code),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// auditor checks one manifest.
type auditor struct {
	m        *manifests.Manifest
	o        *Options
	facts    *ModuleFacts // nil: not checked
	findings []Finding
	// proof is the crashtest proof of the [provider] claim (nil: none).
	proof *ProviderProof
}

// at is where a finding points.
type at struct {
	op        *manifests.Operation
	line, col int
}

func (a *auditor) add(code Code, where at, format string, args ...any) {
	f := Finding{Severity: severityOf(code), Code: code, Connector: a.m.Connector.Name, File: a.m.Path,
		Line: where.line, Column: where.col, Message: fmt.Sprintf(format, args...)}
	if where.op != nil {
		f.Operation = where.op.Name
		if f.Line == 0 {
			f.Line = where.op.Line
		}
	}
	a.findings = append(a.findings, f)
}

// key points at the first of keys the manifest declares in the table at
// path ("connector", "capabilities", …), else at the table.
func (a *auditor) key(path string, keys ...string) at {
	for _, k := range keys {
		if n := a.m.Line(path + "." + k); n > 0 && n != a.m.Line(path) {
			return at{line: n}
		}
	}
	return at{line: a.m.Line(path)}
}

// opKey points at the first of keys op declares, else at its header.
func opKey(op *manifests.Operation, keys ...string) at {
	for _, k := range keys {
		if n := op.KeyLine(k); n != op.Line {
			return at{op: op, line: n}
		}
	}
	return at{op: op, line: op.Line}
}

func (a *auditor) run() ConnectorReport {
	m := a.m
	cr := ConnectorReport{
		Name: m.Connector.Name, Version: m.Connector.Version, File: m.Path, ManifestSHA256: m.Digest, ReviewSHA256: m.ReviewDigest(),
		ABI:        m.Connector.ABI,
		HTTP:       orEmpty(m.Capabilities.HTTP),
		Config:     orEmpty(m.Capabilities.Config),
		Undeclared: []string{},
		Limits: LimitsReport{
			MemoryMiB: m.Limits.MemoryMiB, Timeout: manifests.FormatDuration(m.Limits.Timeout),
			MaxOutputKiB: m.Limits.MaxOutputKiB, Instances: m.Limits.Instances,
		},
		Module:     a.module(),
		Operations: []OperationReport{},
	}
	a.proof = a.providerProof()
	if pv := m.Provider; pv != (manifests.Provider{}) {
		cr.Provider = &ProviderReport{Name: pv.Name, IdempotencyHeader: pv.IdempotencyHeader, IdempotencyField: pv.IdempotencyField,
			Key: pv.IdempotencyKey(), Line: m.Line("provider"), Proof: a.proof}
		if pv.IdempotencyRetention > 0 {
			cr.Provider.IdempotencyRetention = manifests.FormatDuration(pv.IdempotencyRetention)
		}
	}
	a.hosts()
	a.secrets()
	var desc *abi.Description
	if a.facts != nil && a.facts.Description != nil {
		desc = a.facts.Description
	}
	for _, op := range m.Operations {
		cr.Operations = append(cr.Operations, a.operation(op, desc))
	}
	if desc != nil {
		for _, info := range desc.Operations {
			if _, ok := m.Operation(info.Name); !ok {
				cr.Undeclared = append(cr.Undeclared, info.Name)
				a.add(CodeUndeclaredOperation, a.key("connector", "module"),
					"module implements operation %q, which the manifest does not declare: the host will never expose it", info.Name)
			}
		}
	}
	return cr
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (a *auditor) module() ModuleReport {
	m := a.m
	mr := ModuleReport{File: m.Connector.Module, PinnedSHA256: m.Connector.SHA256, DigestStatus: DigestUnknown}
	if m.Connector.SHA256 == "" {
		mr.DigestStatus = DigestUnpinned
		a.add(CodeDigestUnpinned, a.key("connector", "sha256", "module"),
			"module %s is not pinned: set [connector].sha256 (connhost build --pin); the host refuses unpinned modules", m.Connector.Module)
	}
	if a.facts == nil {
		a.add(CodeModuleNotChecked, a.key("connector", "module"), "module %s was not checked: no module facts available", m.Connector.Module)
		return mr
	}
	f := a.facts
	mr.Checked, mr.Found, mr.Path, mr.ActualSHA256, mr.ABI, mr.LoadError = true, f.Found, f.Path, f.ActualSHA256, f.ABI, f.LoadError
	if !f.Found {
		a.add(CodeModuleMissing, a.key("connector", "module"), "module %s not found at %s", m.Connector.Module, f.Path)
		return mr
	}
	if m.Connector.SHA256 != "" && f.ActualSHA256 != "" {
		if f.ActualSHA256 == m.Connector.SHA256 {
			mr.DigestStatus = DigestMatch
		} else {
			mr.DigestStatus = DigestMismatch
			a.add(CodeDigestMismatch, a.key("connector", "sha256"),
				"module %s has sha256 %s but the manifest pins %s: the host refuses to load it", m.Connector.Module, f.ActualSHA256, m.Connector.SHA256)
		}
	}
	if f.LoadError != "" {
		a.add(CodeModuleInvalid, a.key("connector", "module"), "module %s could not be loaded: %s", m.Connector.Module, f.LoadError)
	}
	if f.ABI != 0 && f.ABI != m.Connector.ABI {
		a.add(CodeABIMismatch, a.key("connector", "abi"),
			"module implements abi %d but the manifest declares abi %d", f.ABI, m.Connector.ABI)
	} else if f.Description != nil && f.Description.ABI != 0 && f.Description.ABI != m.Connector.ABI {
		a.add(CodeABIMismatch, a.key("connector", "abi"),
			"module describes itself as abi %d but the manifest declares abi %d", f.Description.ABI, m.Connector.ABI)
	}
	return mr
}

// hosts judges every allowlisted origin by the host's own internal-address
// table: a connector that may reach a metadata service may read the
// machine's cloud credentials; one that may reach private or loopback
// addresses may reach services that trust the network.
func (a *auditor) hosts() {
	external := slices.ContainsFunc(a.m.Operations, func(op *manifests.Operation) bool { return op.Effect == manifests.EffectExternal })
	if len(a.m.Capabilities.HTTP) == 0 && external {
		a.add(CodeHTTPEmpty, at{line: a.m.Line("capabilities.http")},
			"capabilities.http is empty: the connector reaches only the origins a deployment adds with allow_http in connhost.toml, so this audit cannot name or judge the provider its external operations change; name the provider's public origin if it has one")
	}
	for _, o := range a.m.Capabilities.HTTP {
		u, err := url.Parse(o)
		if err != nil {
			continue // the parser refuses it
		}
		where := at{line: a.m.ValueLine("capabilities.http", o)}
		switch class := ipclass.OfHost(u.Hostname()); class {
		case ipclass.Metadata:
			a.add(CodeMetadataHost, where,
				"%s is a cloud metadata service: a connector that reaches it can read the machine's credentials; remove it", o)
			continue
		case ipclass.Loopback:
			a.add(CodeLoopbackHost, where,
				"%s is a loopback origin: fine for a local emulator, but in a deployment it reaches whatever listens on this machine; give a test provider through allow_http in connhost.toml instead", o)
			continue
		case ipclass.Public:
		default:
			a.add(CodeInternalHost, where,
				"%s is %s %s address: a connector that reaches it can reach services that trust the internal network; name the provider's public origin",
				o, article(string(class)), class)
			continue
		}
		if u.Scheme == "http" {
			a.add(CodePlainHTTPHost, where, "%s is plain http: requests, responses and credentials travel unencrypted", o)
		}
	}
}

func (a *auditor) operation(op *manifests.Operation, desc *abi.Description) OperationReport {
	or := OperationReport{
		Name: op.Name, Line: op.Line, Description: op.Description,
		Effect: string(op.Effect), Recovery: string(op.Recovery),
		RequiresApproval: op.RequiresApproval, ApprovalTTL: manifests.FormatDuration(op.ApprovalTTL),
		MaxAttempts: op.MaxAttempts, PolicyVersion: op.PolicyVersion(),
	}
	if op.Recovery == manifests.PolicyReconcile {
		or.ReconcileSettle = manifests.FormatDuration(op.ReconcileSettle)
	}
	or.OutcomeDurability = string(op.OutcomeDurability)
	if op.DuplicateWindow > 0 {
		or.DuplicateWindow, or.OnDuplicate = manifests.FormatDuration(op.DuplicateWindow), string(op.OnDuplicate)
		for _, f := range op.Intent {
			or.Intent = append(or.Intent, f.String())
		}
	}
	or.Review = op.Review
	external := op.Effect == manifests.EffectExternal
	if desc != nil {
		info, ok := desc.Operation(op.Name)
		or.Exports = &Exports{InModule: ok, Execute: info.Execute, ExecuteWithKey: info.ExecuteWithKey, Reconcile: info.Reconcile}
		switch {
		case !ok:
			a.add(CodeExportMissing, opKey(op, "name"), "operation %q is declared but the module does not implement it", op.Name)
		case op.Recovery == manifests.PolicyIdempotentRetry && !info.ExecuteWithKey:
			a.add(CodeExportMissing, opKey(op, "recovery"),
				"recovery idempotent-retry needs the module to export execute_with_key for %q; it does not", op.Name)
		case op.Recovery == manifests.PolicyReconcile && !info.Reconcile:
			a.add(CodeExportMissing, opKey(op, "recovery"),
				"recovery reconcile needs the module to export reconcile for %q; it does not", op.Name)
		case !external && (info.ExecuteWithKey || info.Reconcile):
			var exp []string
			if info.ExecuteWithKey {
				exp = append(exp, "execute_with_key")
			}
			if info.Reconcile {
				exp = append(exp, "reconcile")
			}
			a.add(CodeReadExportsRecovery, opKey(op, "effect"),
				"declared effect \"read\", but the module exports %s for %q: it has an effect to deduplicate or to look for, and the host would re-execute an uncertain call blindly; declare effect \"external\" with a recovery policy",
				strings.Join(exp, " and "), op.Name)
		}
	}
	if !external {
		if verb := effectVerb(op); verb.word != "" {
			a.add(CodeReadSoundsExternal, opKey(op, "effect"),
				"declared effect \"read\", but its %s says %q, a side effect: the host re-executes an uncertain read without asking; if it changes anything, declare effect \"external\" with a recovery policy",
				verb.where, verb.word)
		}
	}
	auto := op.Recovery == manifests.PolicyIdempotentRetry || op.Recovery == manifests.PolicyReconcile
	if external && !op.RequiresApproval && auto {
		a.add(CodeExternalNoApprovalAutoRecovery, opKey(op, "requires_approval", "recovery"),
			"external operation runs without approval and its uncertain calls are re-driven automatically (%s): model-chosen side effects reach the provider with no human in the loop", op.Recovery)
	}
	if external && !op.RequiresApproval && op.Recovery == manifests.PolicyManual {
		a.add(CodeManualWithoutApproval, opKey(op, "requires_approval", "recovery"),
			"recovery manual leaves every uncertain call to an operator, yet no reviewer approves a call before it runs: the operator decides after the fact about a side effect nobody approved; set requires_approval = true")
	}
	if op.Recovery == manifests.PolicyIdempotentRetry {
		a.idempotency(op)
	}
	if d := strings.TrimSpace(op.Description); len(d) < MinDescriptionLen || strings.EqualFold(d, op.Name) {
		a.add(CodeMissingDescription, opKey(op, "description"),
			"description %q is too short to tell the model what the operation does (want at least %d characters)", d, MinDescriptionLen)
	}
	a.schema(op)
	a.unboundedStrings(op)
	if external && op.MaxAttempts > HighAttempts {
		a.add(CodeHighAttempts, opKey(op, "max_attempts"),
			"max_attempts %d: one call may reach the provider up to %d times", op.MaxAttempts, op.MaxAttempts)
	}
	if !op.RequiresApproval && op.ApprovalTTL != manifests.DefaultApprovalTTL {
		a.add(CodeApprovalTTLIgnored, opKey(op, "approval_ttl"),
			"approval_ttl %s has no effect: the operation does not require approval", manifests.FormatDuration(op.ApprovalTTL))
	}
	if op.RequiresApproval && op.ApprovalTTL > a.o.MaxApprovalTTL {
		a.add(CodeApprovalTTLLong, opKey(op, "approval_ttl"),
			"approval_ttl %s is longer than %s: an approval stays usable long after the reviewer looked at the call; shorten it (or audit with --max-approval-ttl)",
			manifests.FormatDuration(op.ApprovalTTL), manifests.FormatDuration(a.o.MaxApprovalTTL))
	}
	or.Verdict = a.verdict(op)
	return or
}

// idempotency checks what an idempotent-retry policy rests on: a provider
// that deduplicates by key, known or declared.
func (a *auditor) idempotency(op *manifests.Operation) {
	if a.m.Provider.IdempotencyHeader != "" || a.m.Provider.IdempotencyField != "" {
		return // declared in [provider]: the verdict shows the promise (proven or not: provider-key-unproven)
	}
	var unknown []string
	for _, o := range a.m.Capabilities.HTTP {
		if u, err := url.Parse(o); err == nil && !slices.Contains(KnownIdempotencyProviders, u.Hostname()) {
			unknown = append(unknown, u.Hostname())
		}
	}
	const how = "declare what the provider guarantees in [provider] (idempotency_header or idempotency_field, idempotency_retention) or waive this finding"
	switch {
	case len(a.m.Capabilities.HTTP) == 0:
		a.add(CodeIdempotencyUnknownProvider, opKey(op, "recovery"),
			"recovery idempotent-retry but the connector declares no HTTP host known to honour Idempotency-Key (known: %s); %s",
			strings.Join(KnownIdempotencyProviders, ", "), how)
	case len(unknown) > 0:
		verb := "is"
		if len(unknown) > 1 {
			verb = "are"
		}
		a.add(CodeIdempotencyUnknownProvider, opKey(op, "recovery"),
			"recovery idempotent-retry relies on the provider deduplicating by key, but %s %s not known to honour Idempotency-Key (known: %s); %s",
			strings.Join(unknown, ", "), verb, strings.Join(KnownIdempotencyProviders, ", "), how)
	}
}

// article returns "an" before a vowel sound, else "a".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
