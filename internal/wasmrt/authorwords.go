package wasmrt

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/connhost/connhost/abi"
)

// What a module may import, and the errors that say so in the words of a
// connector's author: the import that is wrong, what the host offers
// instead, and what fixes it in the usual toolchains. Load and Check share
// them, so the host's refusal and the conformance check read the same.

// specRef points an author at the ABI's specification.
const specRef = "docs/abi.md"

// exportHints say how each toolchain provides an export the ABI requires.
var exportHints = map[string]string{
	abi.ExportInitialize: "the host runs it once per instance before any other export; an empty exported function is enough " +
		"(Go: build with -buildmode=c-shared, as connhost build does; Rust: the connhost-guest crate exports it; " +
		"AssemblyScript: asc --exportStart _initialize, as the connhost kit's asconfig.json says)",
	abi.ExportABIVersion: fmt.Sprintf("it returns the ABI version the module speaks, %d; the connhost guest kits export it", abi.Version),
	abi.ExportAlloc:      "the host asks it for the buffer it writes each call's input into; the connhost guest kits export it",
	abi.ExportDescribe:   "it returns the JSON description of the operations the module implements; the connhost guest kits export it from the registered operations",
}

// importHints explain imports that toolchains add by default.
var importHints = map[string]string{
	"env.abort": "AssemblyScript imports it for failed assertions and runtime errors unless told otherwise: " +
		"build with --use abort=… (the connhost kit's asconfig.json routes it to a trap)",
	"env.seed":  "AssemblyScript imports it for Math.random: use --use Math.random… or avoid Math.random (the host's WASI random_get is there)",
	"env.trace": "AssemblyScript imports it for trace(): remove the trace calls and log with the kit's call.info",
	"env.memory": "the module must define its own memory, not import it " +
		"(Rust/C: do not link with --import-memory)",
}

// hostOffers describes the import modules the host offers, for errors.
func hostOffers() string {
	names := make([]string, len(hostFunctions))
	for i, f := range hostFunctions {
		names[i] = f.name
	}
	return fmt.Sprintf("%s.{%s} and %s.*", abi.HostModule, strings.Join(names, ", "), wasi_snapshot_preview1.ModuleName)
}

// ImportProblem is one import of a module that the host cannot satisfy.
type ImportProblem struct {
	// Module and Name are the import's module and name (e.g. env, abort).
	Module, Name string
	// Problem says what is wrong in an author's words.
	Problem string
}

func (p ImportProblem) Error() string { return p.Problem }

// importProblems checks every import of compiled against what the host
// instantiates in wrt (the connhost module and WASI): a module, a name or
// a signature the host does not offer is a problem, and so is an imported
// memory, table or global.
func importProblems(wrt wazero.Runtime, compiled wazero.CompiledModule) []ImportProblem {
	offered := map[string]map[string]api.FunctionDefinition{}
	for _, mod := range []string{abi.HostModule, wasi_snapshot_preview1.ModuleName} {
		m := wrt.Module(mod)
		if m == nil {
			continue
		}
		offered[mod] = m.ExportedFunctionDefinitions()
	}
	var out []ImportProblem
	for _, def := range compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		full := mod + "." + name
		funcs, ok := offered[mod]
		var problem string
		switch {
		case !ok:
			problem = fmt.Sprintf("your module imports %s; the host offers %s", full, hostOffers())
		case funcs[name] == nil && mod == abi.HostModule:
			problem = fmt.Sprintf("your module imports %s, which the host does not offer; the host offers %s (see %s, Imports)", full, hostOffers(), specRef)
		case funcs[name] == nil:
			problem = fmt.Sprintf("your module imports %s, a WASI function the host does not implement; the host offers %s (wazero's wasi_snapshot_preview1)", full, hostOffers())
		default:
			want := funcs[name]
			if !sameTypes(def.ParamTypes(), want.ParamTypes()) || !sameTypes(def.ResultTypes(), want.ResultTypes()) {
				problem = fmt.Sprintf("your module imports %s as %v -> %v; the host offers it as %v -> %v (see %s, Imports)",
					full, typeNames(def.ParamTypes()), typeNames(def.ResultTypes()), typeNames(want.ParamTypes()), typeNames(want.ResultTypes()), specRef)
			}
		}
		if problem == "" {
			continue
		}
		if h := importHints[full]; h != "" {
			problem += ". " + h
		}
		out = append(out, ImportProblem{Module: mod, Name: name, Problem: problem})
	}
	for _, def := range compiled.ImportedMemories() {
		mod, name, _ := def.Import()
		full := mod + "." + name
		problem := fmt.Sprintf("your module imports its memory (%s); it must define and export its own memory", full)
		if h := importHints[full]; h != "" {
			problem = fmt.Sprintf("your module imports its memory (%s); %s", full, h)
		}
		out = append(out, ImportProblem{Module: mod, Name: name, Problem: problem})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Module+"."+out[i].Name < out[j].Module+"."+out[j].Name
	})
	return out
}

// missingExport is the error for an export the ABI requires that the module
// lacks.
func missingExport(name string) error {
	msg := fmt.Sprintf("%v: module does not export %s", ErrMissingExport, name)
	if h := exportHints[name]; h != "" {
		msg += ": " + h
	}
	return &exportError{msg: msg}
}

// exportError is an error that unwraps to ErrMissingExport with a message
// of its own.
type exportError struct{ msg string }

func (e *exportError) Error() string { return e.msg }
func (e *exportError) Unwrap() error { return ErrMissingExport }
