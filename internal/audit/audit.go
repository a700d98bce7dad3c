// Package audit implements `connhost audit`: a policy review of connector
// manifests against what their modules really are and export, and a diff of
// two versions of a manifest that flags risk changes.
//
// The audit never loads modules itself: the caller hands it the facts about
// each module (found, digest, ABI, self-description) through a FactsFunc,
// so the package needs no wasm runtime.
//
// # Finding codes
//
// Every finding has a severity and a stable code; tools and CI scripts may
// match on codes, which never change meaning.
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
//	undeclared-operation                warning   the module implements an operation the manifest does not declare (the host never exposes it)
//	external-no-approval-auto-recovery  warning   an external operation without approval whose uncertain calls are re-driven automatically (idempotent-retry or reconcile)
//	plain-http-host                     warning   an http:// origin to a non-loopback host: requests and secrets travel in clear
//	idempotency-unknown-provider        warning   an idempotent-retry operation whose hosts are not all in KnownIdempotencyProviders
//	missing-description                 warning   an operation's description is too short (< MinDescriptionLen) to guide the model
//	permissive-schema                   warning   an input schema accepts any object (no properties) or undeclared properties (additionalProperties not false)
//	loopback-host                       info      an origin on a loopback address: fine for emulators, check before deploying
//	high-attempts                       info      an external operation may be dispatched more than HighAttempts times
//	approval-ttl-ignored                info      approval_ttl differs from the default on an operation that requires no approval
//	module-not-checked                  info      no module facts were available (FactsFunc nil): module checks were skipped
//
// Diff change codes are listed on Diff.
package audit

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

// Severity ranks a finding or a change.
type Severity string

// Severities, most severe first.
const (
	// SeverityError fails the audit.
	SeverityError Severity = "error"
	// SeverityWarning fails the audit with --strict.
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
	CodeUndeclaredOperation            Code = "undeclared-operation"
	CodeExternalNoApprovalAutoRecovery Code = "external-no-approval-auto-recovery"
	CodePlainHTTPHost                  Code = "plain-http-host"
	CodeIdempotencyUnknownProvider     Code = "idempotency-unknown-provider"
	CodeMissingDescription             Code = "missing-description"
	CodePermissiveSchema               Code = "permissive-schema"
	CodeLoopbackHost                   Code = "loopback-host"
	CodeHighAttempts                   Code = "high-attempts"
	CodeApprovalTTLIgnored             Code = "approval-ttl-ignored"
	CodeModuleNotChecked               Code = "module-not-checked"
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
	{CodeUndeclaredOperation, SeverityWarning},
	{CodeExternalNoApprovalAutoRecovery, SeverityWarning},
	{CodePlainHTTPHost, SeverityWarning},
	{CodeIdempotencyUnknownProvider, SeverityWarning},
	{CodeMissingDescription, SeverityWarning},
	{CodePermissiveSchema, SeverityWarning},
	{CodeLoopbackHost, SeverityInfo},
	{CodeHighAttempts, SeverityInfo},
	{CodeApprovalTTLIgnored, SeverityInfo},
	{CodeModuleNotChecked, SeverityInfo},
}

// KnownIdempotencyProviders lists the host names of providers known to
// honour an Idempotency-Key header (same key and parameters: the first
// response is replayed, no second effect). An idempotent-retry operation
// whose connector reaches any other host gets an idempotency-unknown-provider
// warning: its policy rests on a promise nobody checked.
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
	// File and Line locate the finding in a manifest (Line 0: no line).
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// Where formats the finding's location: "file:line connector/operation".
func (f Finding) Where() string {
	var parts []string
	if f.File != "" {
		loc := f.File
		if f.Line > 0 {
			loc += fmt.Sprintf(":%d", f.Line)
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
	// Findings are sorted by severity, connector, operation, line, code.
	Findings []Finding `json:"findings"`
}

// ConnectorReport is what one manifest declares and what its module is.
type ConnectorReport struct {
	Name           string       `json:"name"`
	Version        string       `json:"version"`
	File           string       `json:"file"`
	ManifestSHA256 string       `json:"manifest_sha256"`
	ABI            int          `json:"abi"`
	Module         ModuleReport `json:"module"`
	HTTP           []string     `json:"http"`
	Config         []string     `json:"config"`
	Limits         LimitsReport `json:"limits"`
	// Operations are in manifest order.
	Operations []OperationReport `json:"operations"`
	// Undeclared lists operations the module implements but the manifest
	// does not declare.
	Undeclared []string `json:"undeclared_operations"`
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
	// attempt's deadline reconcile's not_applied becomes evidence.
	ReconcileSettle string `json:"reconcile_settle,omitempty"`
	// OutcomeDurability is "lazy" (a succeeded outcome synced within
	// milliseconds after the answer; recovery re-derives it if lost) or
	// "sync".
	OutcomeDurability string `json:"outcome_durability"`
	PolicyVersion     string `json:"policy_version"`
	// Exports is what the module implements for this operation; nil when
	// the module's description is unknown.
	Exports *Exports `json:"exports"`
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

// Count returns the number of findings of severity s.
func (r Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Errors returns the error findings.
func (r Report) Errors() []Finding { return r.filter(SeverityError) }

// Warnings returns the warning findings.
func (r Report) Warnings() []Finding { return r.filter(SeverityWarning) }

// Infos returns the info findings.
func (r Report) Infos() []Finding { return r.filter(SeverityInfo) }

func (r Report) filter(s Severity) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Severity == s {
			out = append(out, f)
		}
	}
	return out
}

// Failed reports whether `connhost audit` exits non-zero: on any error, and
// with strict also on any warning.
func (r Report) Failed(strict bool) bool {
	return r.Count(SeverityError) > 0 || (strict && r.Count(SeverityWarning) > 0)
}

// AuditPaths loads the manifests named by paths (files, or directories
// whose *.toml files are all audited) and audits them. Manifests that do
// not parse are reported as manifest-invalid findings, one per problem with
// its file and line, instead of stopping the audit; unreadable paths are
// manifest-invalid findings too.
func AuditPaths(paths []string, facts FactsFunc) Report {
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
	r := Audit(ms, facts)
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
		files, _ := filepath.Glob(filepath.Join(p, "*.toml"))
		if len(files) == 0 {
			*invalid = append(*invalid, Finding{Severity: SeverityError, Code: CodeManifestInvalid, File: p, Message: "directory holds no *.toml manifest"})
		}
		slices.Sort(files)
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
		out = append(out, Finding{Severity: SeverityError, Code: CodeManifestInvalid, File: ve.File, Line: p.Line, Message: msg})
	}
	return out
}

// Audit reviews parsed manifests against their modules' facts. facts may be
// nil: module checks are then skipped and reported as module-not-checked.
func Audit(ms []*manifests.Manifest, facts FactsFunc) Report {
	r := Report{Connectors: []ConnectorReport{}, Findings: []Finding{}}
	seen := map[string]string{}
	for _, m := range ms {
		if first, ok := seen[m.Connector.Name]; ok {
			r.Findings = append(r.Findings, Finding{
				Severity: SeverityError, Code: CodeDuplicateConnector, Connector: m.Connector.Name, File: m.Path,
				Message: fmt.Sprintf("connector %q is also declared by %s", m.Connector.Name, first),
			})
			continue
		}
		seen[m.Connector.Name] = m.Path
		a := &auditor{m: m}
		if facts != nil {
			f := facts(m)
			a.facts = &f
		}
		r.Connectors = append(r.Connectors, a.run())
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
			cmp.Compare(a.Operation, b.Operation),
			cmp.Compare(a.Code, b.Code),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// auditor checks one manifest.
type auditor struct {
	m        *manifests.Manifest
	facts    *ModuleFacts // nil: not checked
	findings []Finding
}

func (a *auditor) add(sev Severity, code Code, op *manifests.Operation, format string, args ...any) {
	f := Finding{Severity: sev, Code: code, Connector: a.m.Connector.Name, File: a.m.Path, Message: fmt.Sprintf(format, args...)}
	if op != nil {
		f.Operation, f.Line = op.Name, op.Line
	}
	a.findings = append(a.findings, f)
}

func (a *auditor) run() ConnectorReport {
	m := a.m
	cr := ConnectorReport{
		Name: m.Connector.Name, Version: m.Connector.Version, File: m.Path, ManifestSHA256: m.Digest,
		ABI:        m.Connector.ABI,
		HTTP:       orEmpty(m.Capabilities.HTTP),
		Config:     orEmpty(m.Capabilities.Config),
		Undeclared: []string{},
		Limits: LimitsReport{
			MemoryMiB: m.Limits.MemoryMiB, Timeout: FormatDuration(m.Limits.Timeout),
			MaxOutputKiB: m.Limits.MaxOutputKiB, Instances: m.Limits.Instances,
		},
		Module:     a.module(),
		Operations: []OperationReport{},
	}
	a.hosts()
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
				a.add(SeverityWarning, CodeUndeclaredOperation, nil,
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
		a.add(SeverityError, CodeDigestUnpinned, nil,
			"module %s is not pinned: set [connector].sha256 (connhost build --pin); the host refuses unpinned modules", m.Connector.Module)
	}
	if a.facts == nil {
		a.add(SeverityInfo, CodeModuleNotChecked, nil, "module %s was not checked: no module facts available", m.Connector.Module)
		return mr
	}
	f := a.facts
	mr.Checked, mr.Found, mr.Path, mr.ActualSHA256, mr.ABI, mr.LoadError = true, f.Found, f.Path, f.ActualSHA256, f.ABI, f.LoadError
	if !f.Found {
		a.add(SeverityError, CodeModuleMissing, nil, "module %s not found at %s", m.Connector.Module, f.Path)
		return mr
	}
	if m.Connector.SHA256 != "" && f.ActualSHA256 != "" {
		if f.ActualSHA256 == m.Connector.SHA256 {
			mr.DigestStatus = DigestMatch
		} else {
			mr.DigestStatus = DigestMismatch
			a.add(SeverityError, CodeDigestMismatch, nil,
				"module %s has sha256 %s but the manifest pins %s: the host refuses to load it", m.Connector.Module, f.ActualSHA256, m.Connector.SHA256)
		}
	}
	if f.LoadError != "" {
		a.add(SeverityError, CodeModuleInvalid, nil, "module %s could not be loaded: %s", m.Connector.Module, f.LoadError)
	}
	if f.ABI != 0 && f.ABI != m.Connector.ABI {
		a.add(SeverityError, CodeABIMismatch, nil,
			"module implements abi %d but the manifest declares abi %d", f.ABI, m.Connector.ABI)
	} else if f.Description != nil && f.Description.ABI != 0 && f.Description.ABI != m.Connector.ABI {
		a.add(SeverityError, CodeABIMismatch, nil,
			"module describes itself as abi %d but the manifest declares abi %d", f.Description.ABI, m.Connector.ABI)
	}
	return mr
}

func (a *auditor) hosts() {
	for _, o := range a.m.Capabilities.HTTP {
		u, err := url.Parse(o)
		if err != nil {
			continue // the parser refuses it
		}
		if isLoopback(u.Hostname()) {
			a.add(SeverityInfo, CodeLoopbackHost, nil, "%s is a loopback origin: fine for local emulators, check before deploying", o)
			continue
		}
		if u.Scheme == "http" {
			a.add(SeverityWarning, CodePlainHTTPHost, nil, "%s is plain http: requests, responses and credentials travel unencrypted", o)
		}
	}
}

func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (a *auditor) operation(op *manifests.Operation, desc *abi.Description) OperationReport {
	or := OperationReport{
		Name: op.Name, Line: op.Line, Description: op.Description,
		Effect: string(op.Effect), Recovery: string(op.Recovery),
		RequiresApproval: op.RequiresApproval, ApprovalTTL: FormatDuration(op.ApprovalTTL),
		MaxAttempts: op.MaxAttempts, PolicyVersion: op.PolicyVersion(),
	}
	if op.Recovery == manifests.PolicyReconcile {
		or.ReconcileSettle = FormatDuration(op.ReconcileSettle)
	}
	or.OutcomeDurability = string(op.OutcomeDurability)
	if desc != nil {
		info, ok := desc.Operation(op.Name)
		or.Exports = &Exports{InModule: ok, Execute: info.Execute, ExecuteWithKey: info.ExecuteWithKey, Reconcile: info.Reconcile}
		switch {
		case !ok:
			a.add(SeverityError, CodeExportMissing, op, "operation %q is declared but the module does not implement it", op.Name)
		case op.Recovery == manifests.PolicyIdempotentRetry && !info.ExecuteWithKey:
			a.add(SeverityError, CodeExportMissing, op,
				"recovery idempotent-retry needs the module to export execute_with_key for %q; it does not", op.Name)
		case op.Recovery == manifests.PolicyReconcile && !info.Reconcile:
			a.add(SeverityError, CodeExportMissing, op,
				"recovery reconcile needs the module to export reconcile for %q; it does not", op.Name)
		}
	}
	external := op.Effect == manifests.EffectExternal
	auto := op.Recovery == manifests.PolicyIdempotentRetry || op.Recovery == manifests.PolicyReconcile
	if external && !op.RequiresApproval && auto {
		a.add(SeverityWarning, CodeExternalNoApprovalAutoRecovery, op,
			"external operation runs without approval and its uncertain calls are re-driven automatically (%s): model-chosen side effects reach the provider with no human in the loop", op.Recovery)
	}
	if op.Recovery == manifests.PolicyIdempotentRetry {
		var unknown []string
		for _, o := range a.m.Capabilities.HTTP {
			if u, err := url.Parse(o); err == nil && !slices.Contains(KnownIdempotencyProviders, u.Hostname()) {
				unknown = append(unknown, u.Hostname())
			}
		}
		switch {
		case len(a.m.Capabilities.HTTP) == 0:
			a.add(SeverityWarning, CodeIdempotencyUnknownProvider, op,
				"recovery idempotent-retry but the connector declares no HTTP host known to honour Idempotency-Key (known: %s)",
				strings.Join(KnownIdempotencyProviders, ", "))
		case len(unknown) > 0:
			a.add(SeverityWarning, CodeIdempotencyUnknownProvider, op,
				"recovery idempotent-retry relies on the provider deduplicating by key, but %s is not known to honour Idempotency-Key (known: %s)",
				strings.Join(unknown, ", "), strings.Join(KnownIdempotencyProviders, ", "))
		}
	}
	if d := strings.TrimSpace(op.Description); len(d) < MinDescriptionLen || strings.EqualFold(d, op.Name) {
		a.add(SeverityWarning, CodeMissingDescription, op,
			"description %q is too short to tell the model what the operation does (want at least %d characters)", d, MinDescriptionLen)
	}
	if why := permissive(op.Schema()); why != "" {
		a.add(SeverityWarning, CodePermissiveSchema, op, "input schema %s", why)
	}
	if external && op.MaxAttempts > HighAttempts {
		a.add(SeverityInfo, CodeHighAttempts, op,
			"max_attempts %d: one call may reach the provider up to %d times", op.MaxAttempts, op.MaxAttempts)
	}
	if !op.RequiresApproval && op.ApprovalTTL != manifests.DefaultApprovalTTL {
		a.add(SeverityInfo, CodeApprovalTTLIgnored, op,
			"approval_ttl %s has no effect: the operation does not require approval", FormatDuration(op.ApprovalTTL))
	}
	return or
}

// permissive says how a top-level object schema lets arguments through
// unchecked, or "" if it does not: no declared properties, or undeclared
// properties allowed (additionalProperties absent or not false, and no
// unevaluatedProperties: false).
func permissive(s *jsonschema.Schema) string {
	for i := 0; s != nil && s.Ref != nil && i < 8; i++ {
		s = s.Ref
	}
	if s == nil {
		return ""
	}
	if len(s.Properties) == 0 && len(s.PatternProperties) == 0 {
		return "declares no properties: it accepts any object"
	}
	closed := s.AdditionalProperties == false
	if u := s.UnevaluatedProperties; u != nil && u.Bool != nil && !*u.Bool {
		closed = true
	}
	if !closed {
		return `accepts properties it does not declare: set "additionalProperties": false`
	}
	return ""
}

// FormatDuration formats d without zero trailing units ("1h", "90m", "15s").
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
