package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/connhost/connhost/internal/strictjson"
)

// FuzzWireProblem holds the wire check of a tools/call to its promise: it
// never panics; a message it lets through is strict JSON or no tools/call
// (nor names its method or params twice); a refusal is a JSON-RPC error
// that parses, echoing a valid id or null; and the stdio filter hands on
// exactly the lines it lets through.
func FuzzWireProblem(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.connhost/session_id":"s` + "\xff" + `"}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"_meta":{"k":"s\udc80"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"initialize","method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{},"_meta":{"io.connhost/session_id":"s","io.connhost/tool_call_id":"c"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"a":1,"a":2}}`,
		`[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"x":1,"x":1}}]`,
		`{"id":1e400,"method":"tools/call","params":[1,2,]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		id, problem, ok := wireProblem(msg)
		if ok {
			if id != nil || problem != "" {
				t.Fatalf("ok with id %q problem %q", id, problem)
			}
			if _, err := strictjson.ParseObject(msg); err != nil {
				var env struct {
					Method string `json:"method"`
				}
				if json.Unmarshal(msg, &env) == nil && env.Method == "tools/call" {
					t.Fatalf("a tools/call that is not strict was let through: %v", err)
				}
			}
		} else {
			if problem == "" {
				t.Fatal("refused without a problem")
			}
			var r struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			resp := errorResponse(id, problem)
			if err := json.Unmarshal(resp, &r); err != nil || r.JSONRPC != "2.0" || r.Error.Code != codeInvalidParams {
				t.Fatalf("error response %s: %v", resp, err)
			}
		}
		if bytes.ContainsRune(msg, '\n') {
			return
		}
		// The stdio filter: the line goes on exactly when it is let
		// through (or is not an object).
		var out bytes.Buffer
		got, err := io.ReadAll(newStrictStdio(strings.NewReader(string(msg)+"\n"), &lockedWriter{w: &out}))
		if err != nil {
			t.Fatal(err)
		}
		trimmed := bytes.TrimSpace(msg)
		passes := ok || len(trimmed) == 0 || trimmed[0] != '{'
		if passes && string(got) != string(msg)+"\n" {
			t.Fatalf("line let through but not handed on: %q", got)
		}
		if !passes && len(got) > 0 {
			t.Fatalf("refused line handed on: %q", got)
		}
		if !passes && id != nil {
			sc := bufio.NewScanner(&out)
			if !sc.Scan() || !json.Valid(sc.Bytes()) {
				t.Fatalf("no error answer written: %q", out.String())
			}
		}
	})
}
