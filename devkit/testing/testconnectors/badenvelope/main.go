// Command badenvelope is a test connector written without the guest SDK.
// Its exports follow the ABI's calling convention but return broken
// outcomes, selected by operation name:
//
//   - ok: a valid ok outcome with result {"ok":true}.
//   - garbage: bytes that are not an envelope.
//   - truncated: a valid outcome with its last bytes cut off.
//   - trailing: a valid outcome followed by junk.
//   - badjson: an ok outcome whose result is not JSON.
//   - oob: a pointer/length pair past the end of linear memory.
//   - huge: a length of 0xFFFFFFF0 bytes.
//   - empty: a zero result (no envelope at all).
//   - wrongkind: an "applied" outcome from execute.
//
// The exports live in exports_wasip1.go; this file only holds the logic.
package main

import "github.com/connhost/connhost/abi"

const description = `{"abi":1,"operations":[` +
	`{"name":"ok","execute":true},` +
	`{"name":"garbage","execute":true},` +
	`{"name":"truncated","execute":true},` +
	`{"name":"trailing","execute":true},` +
	`{"name":"badjson","execute":true},` +
	`{"name":"oob","execute":true},` +
	`{"name":"huge","execute":true},` +
	`{"name":"empty","execute":true},` +
	`{"name":"wrongkind","execute":true}]}`

// respond returns the outcome bytes for op, or ok=false with a raw
// pointer/length to return as is.
func respond(op string) (out []byte, rawPtr, rawLen uint32, raw bool) {
	good := abi.Outcome{Kind: abi.OutcomeOK, Result: []byte(`{"ok":true}`)}.AppendBinary(nil)
	switch op {
	case "ok":
		return good, 0, 0, false
	case "garbage":
		return []byte("this is not an envelope"), 0, 0, false
	case "truncated":
		return good[:len(good)-3], 0, 0, false
	case "trailing":
		return append(good, 0xde, 0xad), 0, 0, false
	case "badjson":
		return abi.Outcome{Kind: abi.OutcomeOK, Result: []byte(`{not json`)}.AppendBinary(nil), 0, 0, false
	case "oob":
		return nil, 0xFFFF0000, 64, true
	case "huge":
		return nil, 16, 0xFFFFFFF0, true
	case "empty":
		return nil, 0, 0, true
	case "wrongkind":
		return abi.Outcome{Kind: abi.OutcomeApplied, Result: []byte(`1`)}.AppendBinary(nil), 0, 0, false
	}
	return abi.Outcome{Kind: abi.OutcomePermanent, Error: "unknown op " + op}.AppendBinary(nil), 0, 0, false
}

func main() {}
