// Package wasmgen writes small WebAssembly modules byte by byte, for tests
// that need a module no compiler would emit: one that imports what the host
// does not offer, lacks an export, or has an export of the wrong shape. It
// also writes a whole conforming connector in a few dozen bytes, which
// shows that docs/abi.md needs no particular language or SDK.
package wasmgen

import "encoding/binary"

// Value types.
const (
	I32 byte = 0x7f
	I64 byte = 0x7e
)

// Import is an imported function.
type Import struct {
	Module, Name    string
	Params, Results []byte
}

// Func is a defined function; Name, when set, is its export name. Body is
// its instructions without locals and without the final end.
type Func struct {
	Name            string
	Params, Results []byte
	Body            []byte
}

// Segment is an active data segment of memory 0.
type Segment struct {
	Offset uint32
	Data   []byte
}

// Module is a module with at most one memory (exported as "memory" when
// MemoryPages > 0).
type Module struct {
	Imports     []Import
	Funcs       []Func
	MemoryPages uint32
	Data        []Segment
}

// I32Const is the instruction i32.const v.
func I32Const(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }

// I64Const is the instruction i64.const v.
func I64Const(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }

// LocalGet is the instruction local.get i.
func LocalGet(i uint32) []byte { return append([]byte{0x20}, uleb(uint64(i))...) }

// GrowAlloc is a connhost_alloc(size) body that grows memory by the pages
// size needs and returns the address of the first new page.
var GrowAlloc = Cat(LocalGet(0), I32Const(65535), []byte{0x6a}, I32Const(16), []byte{0x76, 0x40, 0x00}, I32Const(16), []byte{0x74})

// Unreachable is the instruction unreachable.
var Unreachable = []byte{0x00}

// Drop is the instruction drop.
var Drop = []byte{0x1a}

// Call is the instruction call i (imports are numbered first).
func Call(i uint32) []byte { return append([]byte{0x10}, uleb(uint64(i))...) }

// Cat concatenates instructions.
func Cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// Encode returns the module's binary form.
func (m Module) Encode() []byte {
	out := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	// Types: one per import and per function, in that order.
	var types [][]byte
	for _, im := range m.Imports {
		types = append(types, funcType(im.Params, im.Results))
	}
	for _, f := range m.Funcs {
		types = append(types, funcType(f.Params, f.Results))
	}
	out = section(out, 1, vec(types))
	var imports [][]byte
	for i, im := range m.Imports {
		e := append(name(im.Module), name(im.Name)...)
		e = append(e, 0x00)
		e = append(e, uleb(uint64(i))...)
		imports = append(imports, e)
	}
	if len(imports) > 0 {
		out = section(out, 2, vec(imports))
	}
	var funcs [][]byte
	for i := range m.Funcs {
		funcs = append(funcs, uleb(uint64(len(m.Imports)+i)))
	}
	out = section(out, 3, vec(funcs))
	if m.MemoryPages > 0 {
		out = section(out, 5, vec([][]byte{append([]byte{0x00}, uleb(uint64(m.MemoryPages))...)}))
	}
	var exports [][]byte
	if m.MemoryPages > 0 {
		exports = append(exports, append(name("memory"), 0x02, 0x00))
	}
	for i, f := range m.Funcs {
		if f.Name != "" {
			e := append(name(f.Name), 0x00)
			exports = append(exports, append(e, uleb(uint64(len(m.Imports)+i))...))
		}
	}
	out = section(out, 7, vec(exports))
	var codes [][]byte
	for _, f := range m.Funcs {
		body := append([]byte{0x00}, f.Body...) // no locals
		body = append(body, 0x0b)
		codes = append(codes, append(uleb(uint64(len(body))), body...))
	}
	out = section(out, 10, vec(codes))
	var data [][]byte
	for _, s := range m.Data {
		e := []byte{0x00}
		e = append(e, I32Const(int32(s.Offset))...)
		e = append(e, 0x0b)
		e = append(e, uleb(uint64(len(s.Data)))...)
		data = append(data, append(e, s.Data...))
	}
	if len(data) > 0 {
		out = section(out, 11, vec(data))
	}
	return out
}

func funcType(params, results []byte) []byte {
	b := []byte{0x60}
	b = append(b, uleb(uint64(len(params)))...)
	b = append(b, params...)
	b = append(b, uleb(uint64(len(results)))...)
	return append(b, results...)
}

func section(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = append(out, uleb(uint64(len(content)))...)
	return append(out, content...)
}

func vec(items [][]byte) []byte {
	b := uleb(uint64(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// Addresses in the memory of [MinimalConnector].
const (
	describeAt = 16
	outcomeAt  = 512
	refusalAt  = 768
)

// MinimalDescription is what [MinimalConnector] describes: one operation,
// "echo", with execute only.
const MinimalDescription = `{"abi":1,"operations":[{"name":"echo","execute":true,"execute_with_key":false,"reconcile":false}]}`

// MinimalOutcome is the outcome envelope every call of [MinimalConnector]
// returns: ok, result {}, no receipt, no error.
var MinimalOutcome = []byte{0xC1, 1, 2, 0, 0, 0, '{', '}', 0, 0, 0, 0, 0, 0, 0, 0}

// MinimalRefusal is the outcome envelope [MinimalConnector] answers for an
// operation other than echo: permanent_error "unknown".
var MinimalRefusal = []byte{0xC1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 'u', 'n', 'k', 'n', 'o', 'w', 'n'}

// MinimalConnector is the smallest module that conforms to docs/abi.md:
// _initialize, the version, an allocator handing out a new buffer (fresh
// pages) for every input, a description with one operation, and
// connhost_execute answering [MinimalOutcome] for echo (any operation
// name of 4 bytes) and [MinimalRefusal] for any other. Tests change it to
// break one rule.
func MinimalConnector() Module {
	pack := func(ptr uint32, n int) int64 { return int64(uint64(ptr)<<32 | uint64(n)) }
	return Module{
		MemoryPages: 1,
		Data: []Segment{
			{Offset: describeAt, Data: []byte(MinimalDescription)},
			{Offset: outcomeAt, Data: MinimalOutcome},
			{Offset: refusalAt, Data: MinimalRefusal},
		},
		Funcs: []Func{
			{Name: "_initialize"},
			{Name: "connhost_abi_version", Results: []byte{I32}, Body: I32Const(1)},
			// New pages for every buffer: (memory.grow((size+65535)>>16)) << 16.
			{Name: "connhost_alloc", Params: []byte{I32}, Results: []byte{I32}, Body: GrowAlloc},
			{Name: "connhost_describe", Results: []byte{I64}, Body: I64Const(pack(describeAt, len(MinimalDescription)))},
			{Name: "connhost_execute", Params: []byte{I32, I32, I32, I32}, Results: []byte{I64}, Body: Cat(
				LocalGet(1), I32Const(4), []byte{0x46}, // op_len == 4
				[]byte{0x04, I64}, I64Const(pack(outcomeAt, len(MinimalOutcome))),
				[]byte{0x05}, I64Const(pack(refusalAt, len(MinimalRefusal))), []byte{0x0b})},
		},
	}
}

// Without returns m without the function exported as name.
func (m Module) Without(name string) Module {
	var fs []Func
	for _, f := range m.Funcs {
		if f.Name != name {
			fs = append(fs, f)
		}
	}
	m.Funcs = fs
	return m
}

// With returns m with f added (replacing a function of the same name).
func (m Module) With(f Func) Module {
	m = m.Without(f.Name)
	m.Funcs = append(append([]Func(nil), m.Funcs...), f)
	return m
}

// Importing returns m with im added to its imports (unused by any body).
func (m Module) Importing(im Import) Module {
	m.Imports = append(append([]Import(nil), m.Imports...), im)
	return m
}
