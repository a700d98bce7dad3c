package audit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/connhost/connhost/manifests"
)

// Change codes of Diff.
const (
	CodeConnectorRenamed         Code = "connector-renamed"
	CodeDigestChangedSameVersion Code = "digest-changed-same-version"
	CodeModuleDigestChanged      Code = "module-digest-changed"
	CodeModuleFileChanged        Code = "module-file-changed"
	CodeABIChanged               Code = "abi-changed"
	CodeOperationAdded           Code = "operation-added"
	CodeOperationRemoved         Code = "operation-removed"
	CodeEffectChanged            Code = "effect-changed"
	CodeEffectDowngraded         Code = "effect-downgraded"
	CodeRecoveryLoosened         Code = "recovery-loosened"
	CodeRecoveryTightened        Code = "recovery-tightened"
	CodeApprovalRemoved          Code = "approval-removed"
	CodeApprovalAdded            Code = "approval-added"
	CodeApprovalTTLRaised        Code = "approval-ttl-raised"
	CodeApprovalTTLLowered       Code = "approval-ttl-lowered"
	CodeAttemptsRaised           Code = "attempts-raised"
	CodeAttemptsLowered          Code = "attempts-lowered"
	CodeSettleLowered            Code = "settle-lowered"
	CodeDurabilityLazy           Code = "durability-lazy"
	CodeDurabilitySync           Code = "durability-sync"
	CodeSettleRaised             Code = "settle-raised"
	CodePolicyVersionChanged     Code = "policy-version-changed"
	CodeHostAdded                Code = "host-added"
	CodeHostRemoved              Code = "host-removed"
	CodeConfigAdded              Code = "config-added"
	CodeConfigRemoved            Code = "config-removed"
	CodeLimitRaised              Code = "limit-raised"
	CodeLimitLowered             Code = "limit-lowered"
	CodeSchemaLoosened           Code = "schema-loosened"
	CodeSchemaChanged            Code = "schema-changed"
	CodeDescriptionChanged       Code = "description-changed"
	CodeDuplicateGuardLoosened   Code = "duplicate-guard-loosened"
	CodeDuplicateGuardTightened  Code = "duplicate-guard-tightened"
)

// ChangeCodes lists every diff change code with its severity, in the order
// of the table on Diff.
var ChangeCodes = []struct {
	Code     Code
	Severity Severity
}{
	{CodeConnectorRenamed, SeverityWarning},
	{CodeDigestChangedSameVersion, SeverityWarning},
	{CodeABIChanged, SeverityWarning},
	{CodeOperationRemoved, SeverityWarning},
	{CodeEffectDowngraded, SeverityWarning},
	{CodeRecoveryLoosened, SeverityWarning},
	{CodeApprovalRemoved, SeverityWarning},
	{CodeApprovalTTLRaised, SeverityWarning},
	{CodeAttemptsRaised, SeverityWarning},
	{CodeSettleLowered, SeverityWarning},
	{CodeDurabilityLazy, SeverityWarning},
	{CodeHostAdded, SeverityWarning},
	{CodeSchemaLoosened, SeverityWarning},
	{CodeDuplicateGuardLoosened, SeverityWarning},
	{CodeModuleDigestChanged, SeverityInfo},
	{CodeEffectChanged, SeverityInfo},
	{CodeModuleFileChanged, SeverityInfo},
	{CodeOperationAdded, SeverityInfo},
	{CodeRecoveryTightened, SeverityInfo},
	{CodeApprovalAdded, SeverityInfo},
	{CodeApprovalTTLLowered, SeverityInfo},
	{CodeAttemptsLowered, SeverityInfo},
	{CodeSettleRaised, SeverityInfo},
	{CodeDurabilitySync, SeverityInfo},
	{CodePolicyVersionChanged, SeverityInfo},
	{CodeHostRemoved, SeverityInfo},
	{CodeConfigAdded, SeverityInfo},
	{CodeConfigRemoved, SeverityInfo},
	{CodeLimitRaised, SeverityInfo},
	{CodeLimitLowered, SeverityInfo},
	{CodeSchemaChanged, SeverityInfo},
	{CodeDescriptionChanged, SeverityInfo},
	{CodeDuplicateGuardTightened, SeverityInfo},
}

// Change is one difference between two versions of a manifest.
type Change struct {
	Severity Severity `json:"severity"`
	Code     Code     `json:"code"`
	// Operation is the operation concerned ("" for connector-level changes).
	Operation string `json:"operation,omitempty"`
	// Field is the manifest field that changed, e.g. "recovery",
	// "capabilities.http", "limits.timeout".
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
	// OldLine and NewLine are the lines of the field in each file (0:
	// absent there, e.g. an operation added).
	OldLine int    `json:"old_line,omitempty"`
	NewLine int    `json:"new_line,omitempty"`
	Message string `json:"message"`
	// Allowed marks a risk increase the caller accepted (DiffOptions.Allow):
	// it no longer fails the diff.
	Allowed bool `json:"allowed,omitempty"`
}

// DiffReport lists what changed between two versions of a manifest, and
// what the audit of the new version found.
type DiffReport struct {
	Connector  string `json:"connector"`
	OldFile    string `json:"old_file"`
	NewFile    string `json:"new_file"`
	OldVersion string `json:"old_version"`
	NewVersion string `json:"new_version"`
	// Changes are sorted by severity, operation (connector-level first),
	// then code.
	Changes []Change `json:"changes"`
	// Findings are the audit's findings on the new manifest (and on either
	// file when it does not parse): a policy the new module cannot honour
	// is an error here, not merely a change.
	Findings []Finding `json:"findings"`
}

// Count returns the number of changes of severity s that are not allowed.
func (d DiffReport) Count(s Severity) int {
	n := 0
	for _, c := range d.Changes {
		if c.Severity == s && !c.Allowed {
			n++
		}
	}
	return n
}

// findings returns the number of unwaived findings of severity s.
func (d DiffReport) findings(s Severity) int {
	n := 0
	for _, f := range d.Findings {
		if f.Severity == s && f.Waived == nil {
			n++
		}
	}
	return n
}

// Failed reports whether `connhost audit --diff` exits non-zero: on an
// error finding of the new manifest, on any risk increase (a warning
// change) that was not allowed, and with strict also on a warning finding
// of the new manifest that is not waived.
func (d DiffReport) Failed(strict bool) bool {
	return d.findings(SeverityError) > 0 || d.Count(SeverityError) > 0 || d.Count(SeverityWarning) > 0 ||
		(strict && d.findings(SeverityWarning) > 0)
}

// DiffOptions configures DiffPaths.
type DiffOptions struct {
	// Audit configures the audit of the new manifest (its Facts also give
	// the old module's digest when the old manifest pins none).
	Audit Options
	// Allow lists the change codes of accepted risk increases: such a
	// change is reported with Allowed set and does not fail the diff. The
	// default value allows none.
	Allow []Code
}

// DiffPaths loads two versions of a manifest, audits the new one against
// its module and compares them. A file that does not load is reported as
// manifest-invalid findings (with file, line and column) in an otherwise
// empty report, never as an error: a broken change is a finding.
func DiffPaths(oldPath, newPath string, o DiffOptions) DiffReport {
	var invalid []Finding
	oldM, err := manifests.Load(oldPath)
	if err != nil {
		invalid = append(invalid, invalidFindings(oldPath, err)...)
	}
	newM, err := manifests.Load(newPath)
	if err != nil {
		invalid = append(invalid, invalidFindings(newPath, err)...)
	}
	if len(invalid) > 0 {
		sortFindings(invalid)
		return DiffReport{OldFile: oldPath, NewFile: newPath, Changes: []Change{}, Findings: invalid}
	}
	// The new module's facts serve the audit and the digest comparison;
	// the old module is looked at only when the old manifest pins none.
	var oldFacts, newFacts ModuleFacts
	ao := o.Audit
	if facts := o.Audit.Facts; facts != nil {
		ao.Facts = func(m *manifests.Manifest) ModuleFacts {
			newFacts = facts(m)
			return newFacts
		}
		if oldM.Connector.SHA256 == "" {
			oldFacts = facts(oldM)
		}
	}
	r := Audit([]*manifests.Manifest{newM}, ao)
	d := Diff(oldM, newM, oldFacts, newFacts)
	d.Findings = r.Findings
	for i := range d.Changes {
		d.Changes[i].Allowed = d.Changes[i].Severity == SeverityWarning && slices.Contains(o.Allow, d.Changes[i].Code)
	}
	return d
}

// recoveryRisk ranks policies by how much the host does on its own after a
// crash: manual waits for a human; reconcile acts on the connector's
// evidence; idempotent-retry re-dispatches trusting the provider to dedup;
// a read with no policy is simply re-executed.
func recoveryRisk(p manifests.Policy) int {
	switch p {
	case manifests.PolicyManual:
		return 0
	case manifests.PolicyReconcile:
		return 1
	case manifests.PolicyIdempotentRetry:
		return 2
	}
	return 3
}

// Diff compares two versions of a connector's manifest (and, when known,
// their modules' facts: an empty ModuleFacts means unknown). Every change
// names the line of its field in both files. Diff does not audit the new
// manifest; DiffPaths does.
//
// Change codes:
//
//	code                         severity  raised when
//	connector-renamed            warning   the connector name changed: recorded intents name the old one
//	digest-changed-same-version  warning   the module digest changed but the connector version did not
//	abi-changed                  warning   the declared ABI version changed
//	operation-removed            warning   an operation disappeared: pending executions of it cannot be recovered
//	effect-downgraded            warning   an operation's effect changed from external to read: the host will re-execute its uncertain calls
//	recovery-loosened            warning   the recovery policy acts more on its own (manual < reconcile < idempotent-retry < read re-execution)
//	approval-removed             warning   an operation no longer requires approval
//	approval-ttl-raised          warning   approvals stay valid longer
//	attempts-raised              warning   an operation may be dispatched more times
//	settle-lowered               warning   reconcile's not_applied is trusted sooner after an attempt's dispatch
//	durability-lazy              warning   a succeeded outcome is no longer synced before the answer
//	host-added                   warning   the connector may reach a new origin
//	schema-loosened              warning   the input schema became permissive (see permissive-schema)
//	duplicate-guard-loosened     warning   the duplicate-intent guard was removed or its window shortened, or repeats are now answered instead of held
//	module-digest-changed        info      the module digest changed together with the version
//	effect-changed               info      an operation's effect changed from read to external
//	module-file-changed          info      the module file name changed
//	operation-added              info      a new operation
//	recovery-tightened           info      the recovery policy acts less on its own
//	approval-added               info      an operation now requires approval
//	approval-ttl-lowered         info      approvals expire sooner
//	attempts-lowered             info      fewer dispatches
//	settle-raised                info      the host waits longer before trusting reconcile's not_applied
//	durability-sync              info      a succeeded outcome is now synced before the answer
//	policy-version-changed       info      the operation's policy version changed: pending approvals no longer match
//	host-removed                 info      an origin is no longer reachable
//	config-added, config-removed info      config keys handed to the module changed
//	limit-raised, limit-lowered  info      a [limits] value changed
//	schema-changed               info      the input schema text changed (ignoring formatting)
//	description-changed          info      the description shown to the model changed
//	duplicate-guard-tightened    info      the duplicate-intent guard was added or its window widened, or repeats are now held instead of answered
func Diff(old, new *manifests.Manifest, oldFacts, newFacts ModuleFacts) DiffReport {
	d := &differ{r: DiffReport{
		Connector: new.Connector.Name, OldFile: old.Path, NewFile: new.Path,
		OldVersion: old.Connector.Version, NewVersion: new.Connector.Version, Changes: []Change{}, Findings: []Finding{},
	}, old: old, new: new}
	oc, nc := old.Connector, new.Connector
	if oc.Name != nc.Name {
		d.add(SeverityWarning, CodeConnectorRenamed, "", "connector.name", oc.Name, nc.Name,
			"connector renamed: intents and approvals recorded under %q no longer match", oc.Name)
	}
	if oc.ABI != nc.ABI {
		d.add(SeverityWarning, CodeABIChanged, "", "connector.abi", strconv.Itoa(oc.ABI), strconv.Itoa(nc.ABI), "declared abi changed")
	}
	if oc.Module != nc.Module {
		d.add(SeverityInfo, CodeModuleFileChanged, "", "connector.module", oc.Module, nc.Module, "module file changed")
	}
	od, nd := digestOf(oc.SHA256, oldFacts), digestOf(nc.SHA256, newFacts)
	if od != "" && nd != "" && od != nd {
		if oc.Version == nc.Version {
			d.add(SeverityWarning, CodeDigestChangedSameVersion, "", "connector.sha256", od, nd,
				"module digest changed but version %s did not: bump the version so intents tell the builds apart", nc.Version)
		} else {
			d.add(SeverityInfo, CodeModuleDigestChanged, "", "connector.sha256", od, nd, "module digest changed with version %s -> %s", oc.Version, nc.Version)
		}
	}
	d.set(CodeHostAdded, CodeHostRemoved, "capabilities.http", old.Capabilities.HTTP, new.Capabilities.HTTP,
		SeverityWarning, "connector may now reach %s", SeverityInfo, "connector may no longer reach %s")
	d.set(CodeConfigAdded, CodeConfigRemoved, "capabilities.config", old.Capabilities.Config, new.Capabilities.Config,
		SeverityInfo, "config key %s is now handed to the module", SeverityInfo, "config key %s is no longer handed to the module")

	ol, nl := old.Limits, new.Limits
	d.limit("limits.memory_mib", int64(ol.MemoryMiB), int64(nl.MemoryMiB), strconv.Itoa(ol.MemoryMiB), strconv.Itoa(nl.MemoryMiB))
	d.limit("limits.timeout", int64(ol.Timeout), int64(nl.Timeout), manifests.FormatDuration(ol.Timeout), manifests.FormatDuration(nl.Timeout))
	d.limit("limits.max_output_kib", int64(ol.MaxOutputKiB), int64(nl.MaxOutputKiB), strconv.Itoa(ol.MaxOutputKiB), strconv.Itoa(nl.MaxOutputKiB))
	d.limit("limits.instances", int64(ol.Instances), int64(nl.Instances), strconv.Itoa(ol.Instances), strconv.Itoa(nl.Instances))

	for _, oop := range old.Operations {
		nop, ok := new.Operation(oop.Name)
		if !ok {
			d.add(SeverityWarning, CodeOperationRemoved, oop.Name, "operation", oop.Name, "",
				"operation removed: pending executions of it can no longer be recovered by the host")
			continue
		}
		d.operation(oop, nop)
	}
	for _, nop := range new.Operations {
		if _, ok := old.Operation(nop.Name); !ok {
			d.add(SeverityInfo, CodeOperationAdded, nop.Name, "operation", "", nop.Name,
				"operation added: effect %s, recovery %s, approval %s", nop.Effect, policyName(nop.Recovery), yesNo(nop.RequiresApproval))
		}
	}
	slices.SortStableFunc(d.r.Changes, func(a, b Change) int {
		return cmp.Or(
			cmp.Compare(a.Severity.rank(), b.Severity.rank()),
			cmp.Compare(a.Operation, b.Operation),
			cmp.Compare(a.Code, b.Code),
			cmp.Compare(a.Old+a.New, b.Old+b.New),
		)
	})
	return d.r
}

func digestOf(pinned string, f ModuleFacts) string {
	if pinned != "" {
		return pinned
	}
	return f.ActualSHA256
}

type differ struct {
	r        DiffReport
	old, new *manifests.Manifest
}

func (d *differ) add(sev Severity, code Code, op, field, old, new, format string, args ...any) {
	d.r.Changes = append(d.r.Changes, Change{
		Severity: sev, Code: code, Operation: op, Field: field, Old: old, New: new,
		OldLine: lineOf(d.old, op, field, old), NewLine: lineOf(d.new, op, field, new),
		Message: fmt.Sprintf(format, args...),
	})
}

// lineOf returns the line of field (of operation op, when set) in m: for a
// list entry, the line holding value; for an operation added or removed,
// its header; 0 when m lacks it.
func lineOf(m *manifests.Manifest, op, field, value string) int {
	if op == "" {
		if strings.HasPrefix(field, "capabilities.") && value != "" {
			return m.ValueLine(field, value)
		}
		return m.Line(field)
	}
	o, ok := m.Operation(op)
	if !ok {
		return 0
	}
	switch field {
	case "operation", "policy_version":
		return o.Line
	}
	return o.KeyLine(field)
}

func (d *differ) set(added, removed Code, field string, old, new []string, addSev Severity, addMsg string, remSev Severity, remMsg string) {
	for _, s := range new {
		if !slices.Contains(old, s) {
			d.add(addSev, added, "", field, "", s, addMsg, s)
		}
	}
	for _, s := range old {
		if !slices.Contains(new, s) {
			d.add(remSev, removed, "", field, s, "", remMsg, s)
		}
	}
}

func (d *differ) limit(field string, old, new int64, oldS, newS string) {
	switch {
	case new > old:
		d.add(SeverityInfo, CodeLimitRaised, "", field, oldS, newS, "%s raised from %s to %s", field, oldS, newS)
	case new < old:
		d.add(SeverityInfo, CodeLimitLowered, "", field, oldS, newS, "%s lowered from %s to %s: calls that fitted before may now fail", field, oldS, newS)
	}
}

func (d *differ) operation(o, n *manifests.Operation) {
	name := n.Name
	if o.Effect != n.Effect {
		if n.Effect == manifests.EffectRead {
			d.add(SeverityWarning, CodeEffectDowngraded, name, "effect", string(o.Effect), string(n.Effect),
				"risk increase: now declared read, so the host re-executes its uncertain calls freely; make sure it has no side effect")
		} else {
			d.add(SeverityInfo, CodeEffectChanged, name, "effect", string(o.Effect), string(n.Effect),
				"now declared external: it has side effects and needs a recovery policy and, likely, approval")
		}
	}
	if o.Recovery != n.Recovery {
		or, nr := recoveryRisk(o.Recovery), recoveryRisk(n.Recovery)
		switch {
		case nr > or:
			d.add(SeverityWarning, CodeRecoveryLoosened, name, "recovery", policyName(o.Recovery), policyName(n.Recovery),
				"risk increase: after a crash the host now acts on its own with %s instead of %s", policyName(n.Recovery), policyName(o.Recovery))
		default:
			d.add(SeverityInfo, CodeRecoveryTightened, name, "recovery", policyName(o.Recovery), policyName(n.Recovery),
				"after a crash the host now does less on its own: %s instead of %s", policyName(n.Recovery), policyName(o.Recovery))
		}
	}
	switch {
	case o.RequiresApproval && !n.RequiresApproval:
		d.add(SeverityWarning, CodeApprovalRemoved, name, "requires_approval", "true", "false",
			"approval removed: calls now run without a reviewer")
	case !o.RequiresApproval && n.RequiresApproval:
		d.add(SeverityInfo, CodeApprovalAdded, name, "requires_approval", "false", "true", "approval now required")
	}
	if o.RequiresApproval && n.RequiresApproval && o.ApprovalTTL != n.ApprovalTTL {
		os, ns := manifests.FormatDuration(o.ApprovalTTL), manifests.FormatDuration(n.ApprovalTTL)
		if n.ApprovalTTL > o.ApprovalTTL {
			d.add(SeverityWarning, CodeApprovalTTLRaised, name, "approval_ttl", os, ns, "approvals now stay open for %s instead of %s", ns, os)
		} else {
			d.add(SeverityInfo, CodeApprovalTTLLowered, name, "approval_ttl", os, ns, "approvals now expire after %s instead of %s", ns, os)
		}
	}
	if o.MaxAttempts != n.MaxAttempts {
		os, ns := strconv.Itoa(o.MaxAttempts), strconv.Itoa(n.MaxAttempts)
		if n.MaxAttempts > o.MaxAttempts {
			d.add(SeverityWarning, CodeAttemptsRaised, name, "max_attempts", os, ns, "one call may now be dispatched up to %s times instead of %s", ns, os)
		} else {
			d.add(SeverityInfo, CodeAttemptsLowered, name, "max_attempts", os, ns, "one call is now dispatched at most %s times instead of %s", ns, os)
		}
	}
	if o.Recovery == manifests.PolicyReconcile && n.Recovery == manifests.PolicyReconcile && o.ReconcileSettle != n.ReconcileSettle {
		os, ns := manifests.FormatDuration(o.ReconcileSettle), manifests.FormatDuration(n.ReconcileSettle)
		if n.ReconcileSettle < o.ReconcileSettle {
			d.add(SeverityWarning, CodeSettleLowered, name, "reconcile_settle", os, ns,
				"reconcile's not_applied is now trusted %s after the attempt was dispatched instead of %s: a request still in flight may be sent again", ns, os)
		} else {
			d.add(SeverityInfo, CodeSettleRaised, name, "reconcile_settle", os, ns,
				"the host now waits %s after the attempt was dispatched before trusting not_applied, instead of %s", ns, os)
		}
	}
	if o.OutcomeDurability != n.OutcomeDurability {
		os, ns := string(o.OutcomeDurability), string(n.OutcomeDurability)
		if n.OutcomeDurability == manifests.DurabilityLazy {
			d.add(SeverityWarning, CodeDurabilityLazy, name, "outcome_durability", os, ns,
				"a succeeded outcome is now synced after the answer, not before: recovery re-derives it if a crash loses it")
		} else {
			d.add(SeverityInfo, CodeDurabilitySync, name, "outcome_durability", os, ns,
				"a succeeded outcome is now synced before the answer")
		}
	}
	if ov, nv := o.PolicyVersion(), n.PolicyVersion(); ov != nv {
		d.add(SeverityInfo, CodePolicyVersionChanged, name, "policy_version", ov, nv,
			"policy version changed: approvals and intents recorded under %s no longer match", ov)
	}
	if !sameJSON(o.InputSchema, n.InputSchema) {
		if permissive(o.Schema()) == "" && permissive(n.Schema()) != "" {
			d.add(SeverityWarning, CodeSchemaLoosened, name, "input_schema", "", "", "input schema now %s", permissive(n.Schema()))
		} else {
			d.add(SeverityInfo, CodeSchemaChanged, name, "input_schema", "", "", "input schema changed")
		}
	}
	if strings.TrimSpace(o.Description) != strings.TrimSpace(n.Description) {
		d.add(SeverityInfo, CodeDescriptionChanged, name, "description", o.Description, n.Description, "description shown to the model changed")
	}
	d.duplicateGuard(name, o, n)
}

// duplicateGuard compares two versions of an operation's duplicate-intent
// guard: fewer repeats stopped (no guard, a shorter window, answered
// instead of held) is a risk increase.
func (d *differ) duplicateGuard(name string, o, n *manifests.Operation) {
	guard := func(op *manifests.Operation) string {
		if op.DuplicateWindow == 0 {
			return "none"
		}
		return manifests.FormatDuration(op.DuplicateWindow) + ", " + string(op.OnDuplicate)
	}
	og, ng := guard(o), guard(n)
	if o.DuplicateWindow > 0 && n.DuplicateWindow > 0 {
		d.intent(name, o, n)
	}
	if og == ng {
		return
	}
	field := "duplicate_window"
	if o.DuplicateWindow == n.DuplicateWindow {
		field = "on_duplicate"
	}
	switch {
	case n.DuplicateWindow == 0:
		d.add(SeverityWarning, CodeDuplicateGuardLoosened, name, field, og, ng,
			"risk increase: the duplicate-intent guard was removed: a call re-issued under a new tool-call id now runs again")
	case o.DuplicateWindow > 0 && n.DuplicateWindow < o.DuplicateWindow:
		d.add(SeverityWarning, CodeDuplicateGuardLoosened, name, field, og, ng,
			"risk increase: repeats are now stopped within %s instead of %s", manifests.FormatDuration(n.DuplicateWindow), manifests.FormatDuration(o.DuplicateWindow))
	case o.DuplicateWindow > 0 && o.OnDuplicate == manifests.DuplicateHold && n.OnDuplicate == manifests.DuplicateAnswer:
		d.add(SeverityWarning, CodeDuplicateGuardLoosened, name, field, og, ng,
			"risk increase: a repeat of a succeeded call is now answered with its outcome instead of held for a reviewer: a repeat meant as a second effect is never asked about")
	default:
		d.add(SeverityInfo, CodeDuplicateGuardTightened, name, field, og, ng, "the duplicate-intent guard now stops more repeats (%s, was %s)", ng, og)
	}
}

// intent compares two versions of a guarded operation's intent: an
// argument compared that was not, or compared more strictly (text where
// case or e-mail was), makes repeats that differed only there run again.
func (d *differ) intent(name string, o, n *manifests.Operation) {
	text := func(op *manifests.Operation) string {
		if len(op.Intent) == 0 {
			return "every argument"
		}
		fields := make([]string, len(op.Intent))
		for i, f := range op.Intent {
			fields[i] = f.String()
		}
		return strings.Join(fields, ", ")
	}
	ot, nt := text(o), text(n)
	if ot == nt {
		return
	}
	kinds := func(op *manifests.Operation) map[string]manifests.IntentKind {
		m := map[string]manifests.IntentKind{}
		for _, f := range op.Intent {
			m[f.Path] = f.Kind
		}
		return m
	}
	ok, nk := kinds(o), kinds(n)
	loosened := len(o.Intent) > 0 && len(n.Intent) == 0
	for path, kind := range nk {
		if was, had := ok[path]; len(o.Intent) > 0 && (!had || kind == manifests.IntentText && was != manifests.IntentText) {
			loosened = true
		}
	}
	if loosened {
		d.add(SeverityWarning, CodeDuplicateGuardLoosened, name, "intent", ot, nt,
			"risk increase: the duplicate-intent guard compares more, or more strictly (%s, was %s): a repeat that differs only there now runs again", nt, ot)
		return
	}
	d.add(SeverityInfo, CodeDuplicateGuardTightened, name, "intent", ot, nt, "the duplicate-intent guard now stops more repeats: it compares %s (was %s)", nt, ot)
}

// sameJSON compares two JSON texts ignoring formatting and key order.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func policyName(p manifests.Policy) string {
	if p == "" {
		return "re-execute (read)"
	}
	return string(p)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
