package wasmrt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

// CheckStep is one rule of docs/abi.md checked against a module.
type CheckStep struct {
	// Check names the rule: "compile", "imports", "exports", "initialize",
	// "abi version", "describe", "manifest" or "round trip".
	Check string `json:"check"`
	// Subject is what the step looked at (an import, an export, an
	// operation and entry point), when there is one.
	Subject string `json:"subject,omitempty"`
	// OK reports whether the module keeps the rule.
	OK bool `json:"ok"`
	// Detail says what was found; for a failed step, what is wrong and
	// what fixes it, in a connector author's terms.
	Detail string `json:"detail"`
}

// CheckReport is what [Check] found.
type CheckReport struct {
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
	// Conforms is true when every step is OK.
	Conforms bool `json:"conforms"`
	// Description is what the module said about itself, when it got that
	// far.
	Description *abi.Description `json:"description,omitempty"`
	Steps       []CheckStep      `json:"steps"`
}

// Problems returns the failed steps.
func (r CheckReport) Problems() []CheckStep {
	var out []CheckStep
	for _, s := range r.Steps {
		if !s.OK {
			out = append(out, s)
		}
	}
	return out
}

// checkUnknownOperation is the operation name the round trip calls to see
// how a module answers an operation it does not know.
const checkUnknownOperation = "connhost.abi-check.unknown-operation"

// checkKey is the idempotency key of the round trip's keyed calls.
const checkKey = "ck_abicheck0000000000000000000000"

// Check loads the module code the way the host does and checks it against
// docs/abi.md: its imports, its exports and their signatures, _initialize,
// the version, the description, and, when m is not nil, the manifest's
// operations and policies. It then calls each entry point: an operation
// the module does not know, a larger input (a new connhost_alloc), and
// every described operation with {} as its arguments. Every HTTP request
// is denied and no config value is set, so no call can reach a provider.
// A manifest's pinned sha256 is not enforced (a mismatch is reported).
// Check never returns an error: what goes wrong is a failed step.
func Check(ctx context.Context, code []byte, m *manifests.Manifest) (rep CheckReport) {
	sum := sha256.Sum256(code)
	rep = CheckReport{SHA256: hex.EncodeToString(sum[:]), Size: len(code)}
	add := func(check, subject string, ok bool, format string, a ...any) {
		rep.Steps = append(rep.Steps, CheckStep{Check: check, Subject: subject, OK: ok, Detail: fmt.Sprintf(format, a...)})
	}
	defer func() {
		rep.Conforms = len(rep.Problems()) == 0
	}()

	name := "abi-check"
	limits := effectiveLimits(manifests.Limits{})
	if m != nil {
		if m.Connector.Name != "" {
			name = m.Connector.Name
		}
		limits = effectiveLimits(m.Limits)
		if err := checkLimits(limits); err != nil {
			add("manifest", "limits", false, "%v", err)
			return rep
		}
		if m.Connector.ABI != 0 && m.Connector.ABI != abi.Version {
			add("manifest", "abi", false, "the manifest declares abi %d; this host speaks abi %d", m.Connector.ABI, abi.Version)
		}
		switch pinned := m.Connector.SHA256; {
		case pinned == "":
			add("manifest", "sha256", false, "the manifest pins no sha256; the host refuses unpinned modules: connhost build --pin, or paste %s", rep.SHA256)
		case !strings.EqualFold(pinned, rep.SHA256):
			add("manifest", "sha256", false, "the manifest pins %s, this module is %s: rebuild and pin with connhost build --pin", pinned, rep.SHA256)
		}
	}

	opts := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	opts.EnsureDefaults()
	rt := &Runtime{opts: opts, cache: wazero.NewCompilationCache(), conns: map[*Connector]struct{}{}}
	defer rt.cache.Close(context.WithoutCancel(ctx))
	hc, err := newHTTPCap(name, nil, &rt.opts) // allows nothing
	if err != nil {
		add("compile", "", false, "%v", err)
		return rep
	}
	defer hc.close()
	c := &Connector{rt: rt, m: m, name: name, limits: limits, http: hc, log: rt.opts.Logger,
		configOK: map[string]bool{}, maxOut: uint32(limits.MaxOutputKiB) * 1024}
	if m != nil {
		for _, k := range m.Capabilities.Config {
			c.configOK[k] = true // declared, and not set
		}
	}
	c.wrt = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(limits.MemoryMiB)*16).
		WithCompilationCache(rt.cache))
	defer c.wrt.Close(context.WithoutCancel(ctx))
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, c.wrt); err != nil {
		add("compile", "", false, "host: instantiate wasi: %v", err)
		return rep
	}
	if err := instantiateHostModule(ctx, c.wrt); err != nil {
		add("compile", "", false, "%v", err)
		return rep
	}
	c.compiled, err = c.wrt.CompileModule(ctx, code)
	if err != nil {
		add("compile", "", false, "the module does not compile as WebAssembly 2.0: %v", err)
		return rep
	}
	add("compile", "", true, "%d bytes of WebAssembly", len(code))

	// Imports.
	probs := importProblems(c.wrt, c.compiled)
	for _, p := range probs {
		add("imports", p.Module+"."+p.Name, false, "%s", p.Problem)
	}
	if len(probs) == 0 {
		add("imports", "", true, "%s", importSummary(c.compiled))
	}

	// Exports.
	exports := c.compiled.ExportedFunctions()
	required := []string{abi.ExportInitialize, abi.ExportABIVersion, abi.ExportAlloc, abi.ExportDescribe}
	exportsOK := true
	for _, e := range append(required, abi.ExportExecute, abi.ExportExecuteWithKey, abi.ExportReconcile) {
		if _, ok := exports[e]; !ok && !isRequired(e, required) {
			continue // checked against the description below
		}
		if err := checkExports(exports, e); err != nil {
			exportsOK = false
			add("exports", e, false, "%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), ErrMissingExport.Error()+": "), ErrBadModule.Error()+": "))
		}
	}
	if exportsOK {
		var names []string
		for e := range exports {
			if _, known := exportSignatures[e]; known {
				names = append(names, e)
			}
		}
		sort.Strings(names)
		add("exports", "", true, "%s, each with the ABI's signature", strings.Join(names, ", "))
	}
	if len(probs) > 0 || !exportsOK {
		return rep
	}

	// _initialize, the version, the description: what Load does.
	inst, err := c.newInstance(ctx)
	if err != nil {
		add("initialize", abi.ExportInitialize, false, "instantiating the module and running _initialize failed: %v", err)
		return rep
	}
	add("initialize", abi.ExportInitialize, true, "the module instantiated and _initialize returned")
	defer func() {
		if inst != nil {
			inst.close()
		}
	}()
	ictx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	v, err := inst.callNoArgs(ictx, abi.ExportABIVersion)
	switch {
	case err != nil:
		add("abi version", abi.ExportABIVersion, false, "calling it failed: %v", err)
		return rep
	case int32(uint32(v)) != abi.Version:
		add("abi version", abi.ExportABIVersion, false, "it returns %d; this host speaks abi %d: build with a kit for abi %d", int32(uint32(v)), abi.Version, abi.Version)
		return rep
	}
	add("abi version", abi.ExportABIVersion, true, "%d", abi.Version)
	packed, err := inst.callNoArgs(ictx, abi.ExportDescribe)
	if err != nil {
		add("describe", abi.ExportDescribe, false, "calling it failed: %v", err)
		return rep
	}
	ptr, n := abi.UnpackPtrLen(packed)
	raw, ok := inst.mem.Read(ptr, n)
	switch {
	case n > maxDescribeBytes:
		add("describe", abi.ExportDescribe, false, "it returns %d bytes; a description may have at most %d", n, maxDescribeBytes)
		return rep
	case !ok:
		add("describe", abi.ExportDescribe, false, "it returns [%d, +%d), outside the module's memory of %d bytes: return (ptr << 32) | len", ptr, n, inst.mem.Size())
		return rep
	}
	desc, err := abi.DecodeDescription(raw)
	if err != nil {
		add("describe", abi.ExportDescribe, false, "%v; it returned %q (see docs/abi.md, Description)", err, clipText(string(raw), 200))
		return rep
	}
	rep.Description = &desc
	if desc.ABI != abi.Version {
		add("describe", abi.ExportDescribe, false, "the description says abi %d; this host speaks abi %d", desc.ABI, abi.Version)
		return rep
	}
	descOK := true
	for _, op := range desc.Operations {
		for _, e := range entryPoints(op) {
			if _, ok := exports[e]; !ok {
				descOK = false
				add("describe", op.Name, false, "the description says %s answers %s, which the module does not export", op.Name, e)
			}
		}
	}
	if descOK {
		add("describe", abi.ExportDescribe, true, "%s", describeSummary(desc))
	}

	// The manifest.
	if m != nil {
		if _, err := crossCheck(name, m, desc, exports); err != nil {
			for _, e := range splitJoined(err) {
				add("manifest", "", false, "%v", e)
			}
		} else {
			add("manifest", m.Path, true, "every operation the manifest declares is implemented, and each recovery policy has its entry point")
		}
	}
	if !descOK {
		return rep
	}

	// Round trips, on a fresh instance after any failure.
	c.ops = map[string]opEntry{}
	for _, op := range desc.Operations {
		c.ops[op.Name] = opEntry{info: op}
	}
	inst.bindExports()
	type trip struct {
		op, export, args string
		want             func(abi.OutcomeKind) bool
		hint             string
	}
	var trips []trip
	for _, e := range []string{abi.ExportExecute, abi.ExportExecuteWithKey, abi.ExportReconcile} {
		if _, ok := exports[e]; !ok {
			continue
		}
		want, hint := func(k abi.OutcomeKind) bool { return k == abi.OutcomePermanent }, "answer permanent_error for an operation the module does not know"
		if e == abi.ExportReconcile {
			want, hint = func(k abi.OutcomeKind) bool { return k == abi.OutcomeUnknown }, "answer unknown for an operation the module does not know"
		}
		trips = append(trips, trip{checkUnknownOperation, e, `{}`, want, hint})
	}
	// A larger input than the first: the host asks connhost_alloc again.
	big := `{"pad":"` + strings.Repeat("x", 256<<10) + `"}`
	for _, e := range []string{abi.ExportExecute, abi.ExportExecuteWithKey} {
		if _, ok := exports[e]; ok {
			trips = append(trips, trip{checkUnknownOperation, e, big, func(k abi.OutcomeKind) bool { return k == abi.OutcomePermanent },
				"answer permanent_error for an operation the module does not know"})
			break
		}
	}
	for _, op := range desc.Operations {
		for _, e := range entryPoints(op) {
			trips = append(trips, trip{op.Name, e, `{}`, nil, ""})
		}
	}
	for _, tr := range trips {
		if inst == nil {
			if inst, err = c.newInstance(ctx); err != nil {
				add("round trip", "", false, "a new instance failed: %v", err)
				return rep
			}
			inst.bindExports()
		}
		key := checkKey
		if tr.export == abi.ExportExecute {
			key = ""
		}
		req := CallRequest{Export: tr.export, Operation: tr.op, Key: key, ExecutionID: "ex_abicheck", Args: []byte(tr.args)}
		dctx, cancel := context.WithTimeout(ctx, limits.Timeout)
		cc := &callCtx{Context: dctx, inst: inst, phase: phaseAlloc, op: tr.op, execID: req.ExecutionID}
		total := uint32(len(req.Operation) + len(req.Key) + len(req.Args))
		out, kind, err := inst.call(cc, req, total)
		inst.cur.Store(nil)
		inst.pending, inst.hasPending = nil, false
		subject := tr.op + " " + tr.export
		if tr.op == checkUnknownOperation {
			subject = "an unknown operation, " + tr.export
			if len(tr.args) > 1024 {
				subject = fmt.Sprintf("an input of %d KiB, %s", len(tr.args)>>10, tr.export)
			}
		}
		if err != nil {
			if kind == 0 {
				kind, err = c.classify(dctx, ctx, inst, err)
			}
			cancel()
			inst.close()
			inst = nil
			var hint string
			switch {
			case kind == KindTrap && tr.op == checkUnknownOperation:
				hint = "; " + tr.hint
			case kind == KindTrap:
				hint = "; a trap is taken as an attempt that may have acted: answer permanent_error for arguments the operation cannot use"
			case kind == KindBadEnvelope && strings.Contains(err.Error(), abi.ExportAlloc):
				hint = "; connhost_alloc must return a buffer of at least the size asked for, inside memory"
			case kind == KindBadEnvelope:
				hint = "; see docs/abi.md, Outcome envelope"
			}
			add("round trip", subject, false, "%s: %v%s", kind, err, hint)
			continue
		}
		cancel()
		if tr.want != nil && !tr.want(out.Kind) {
			add("round trip", subject, false, "answered %s (%s); %s", out.Kind, out.Error, tr.hint)
			continue
		}
		detail := out.Kind.String()
		if out.Error != "" {
			detail += ": " + clipText(out.Error, 160)
		}
		add("round trip", subject, true, "%s", detail)
	}
	return rep
}

func isRequired(e string, required []string) bool {
	for _, r := range required {
		if r == e {
			return true
		}
	}
	return false
}

// entryPoints lists the call exports op says it answers.
func entryPoints(op abi.OperationInfo) []string {
	var out []string
	if op.Execute {
		out = append(out, abi.ExportExecute)
	}
	if op.ExecuteWithKey {
		out = append(out, abi.ExportExecuteWithKey)
	}
	if op.Reconcile {
		out = append(out, abi.ExportReconcile)
	}
	return out
}

func importSummary(compiled wazero.CompiledModule) string {
	by := map[string][]string{}
	for _, def := range compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		by[mod] = append(by[mod], name)
	}
	if len(by) == 0 {
		return "none"
	}
	var parts []string
	for _, mod := range []string{abi.HostModule, wasi_snapshot_preview1.ModuleName} {
		if names := by[mod]; len(names) > 0 {
			sort.Strings(names)
			names = slices.Compact(names)
			parts = append(parts, fmt.Sprintf("%s.{%s}", mod, strings.Join(names, ", ")))
		}
	}
	return strings.Join(parts, " and ") + ", all offered by the host"
}

func describeSummary(d abi.Description) string {
	parts := make([]string, len(d.Operations))
	for i, op := range d.Operations {
		var eps []string
		for _, e := range entryPoints(op) {
			eps = append(eps, strings.TrimPrefix(e, "connhost_"))
		}
		parts[i] = op.Name + " (" + strings.Join(eps, ", ") + ")"
	}
	return fmt.Sprintf("abi %d, %d operations: %s", d.ABI, len(d.Operations), strings.Join(parts, ", "))
}

// splitJoined returns the errors an errors.Join holds, or err alone.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, splitJoined(e)...)
		}
		return out
	}
	return []error{err}
}
