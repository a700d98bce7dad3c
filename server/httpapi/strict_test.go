package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/strictjson"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// TestExecuteRefusesAmbiguousEnvelope: a body that encoding/json would
// read in a way the client may not have meant is a bad_request naming the
// key, and nothing is recorded. "call_\xff" and "call_\xfe" used to
// decode to one tool call id ("call_\ufffd"), so the second request got
// the first one's recorded result.
func TestExecuteRefusesAmbiguousEnvelope(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"invalid UTF-8 ff", "{\"session_id\":\"s1\",\"tool_call_id\":\"call_\xff\",\"tool\":\"noop.echo\",\"arguments\":{}}",
			"request body: not valid UTF-8 (byte 0xff at offset 40)"},
		{"invalid UTF-8 fe", "{\"session_id\":\"s1\",\"tool_call_id\":\"call_\xfe\",\"tool\":\"noop.echo\",\"arguments\":{}}",
			"request body: not valid UTF-8 (byte 0xfe at offset 40)"},
		{"unpaired surrogate escape", `{"session_id":"s1","tool_call_id":"call_\udfff","tool":"noop.echo","arguments":{}}`,
			"request body: unpaired UTF-16 surrogate escape at offset 40"},
		{"tool_call_id twice", `{"session_id":"s1","tool_call_id":"a","tool_call_id":"b","tool":"noop.echo","arguments":{}}`,
			`request body: the key "tool_call_id" is named twice in the top-level object`},
		{"session_id twice", `{"session_id":"s1","tool_call_id":"a","tool":"noop.echo","arguments":{},"session_id":"s2"}`,
			`the key "session_id" is named twice`},
		{"field in another case", `{"session_id":"s1","tool_call_id":"a","TOOL_CALL_ID":"b","tool":"noop.echo","arguments":{}}`,
			`unknown field "TOOL_CALL_ID" (field names are case-sensitive: "tool_call_id")`},
		{"control character", `{"session_id":"s1","tool_call_id":"call\u0000","tool":"noop.echo","arguments":{}}`,
			"tool_call_id holds the control character U+0000 at offset 4"},
		{"too long", `{"session_id":"` + strings.Repeat("s", 300) + `","tool_call_id":"a","tool":"noop.echo","arguments":{}}`,
			"session_id is 300 bytes long; at most 256 are allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := c.post("/v1/executions", tc.body).problem(t, CodeBadRequest)
			if !strings.Contains(p.Detail, tc.want) {
				t.Fatalf("detail %q, want %q", p.Detail, tc.want)
			}
		})
	}
	// A key twice in the model's arguments is a problem of the arguments.
	p := c.post("/v1/executions", `{"session_id":"s1","tool_call_id":"a","tool":"noop.echo","arguments":{"msg":{"to":"x","to":"y"}}}`).
		problem(t, CodeInvalidArguments)
	if !strings.Contains(p.Detail, `the key "to" is named twice in the object at /arguments/msg`) {
		t.Fatalf("detail %q", p.Detail)
	}
	recs, err := env.ex.Ledger().List(context.Background(), ledger.Filter{Limit: 10})
	if err != nil || len(recs) != 0 {
		t.Fatalf("refused bodies recorded %d executions (%v)", len(recs), err)
	}
	// Other bodies are held to the same rule (dev's anonymous principal may
	// approve).
	dev := client{t: t, base: env.serve(t, Options{Anonymous: &DevLoopback}).URL}
	p = dev.post("/v1/approvals/ap_x/approve", `{"digest":"a","digest":"b"}`).problem(t, CodeBadRequest)
	if !strings.Contains(p.Detail, `"digest" is named twice`) {
		t.Fatalf("approve with two digests: %q", p.Detail)
	}
}

// FuzzDecodeToolCall: a body decode accepts decodes one way only:
// it is a strict JSON document, and every identity field the handler gets
// is exactly the string the body holds.
func FuzzDecodeToolCall(f *testing.F) {
	for _, s := range []string{
		`{"session_id":"s1","tool_call_id":"c1","tool":"noop.echo","arguments":{}}`,
		`{"session_id":"s1","tool_call_id":"c1","tool_call_id":"c2","tool":"t","arguments":{}}`,
		`{"Session_ID":"s1","tool_call_id":"c\u00e9","tool":"t","arguments":{"a":[1,{"b":2}]}}`,
		"{\"session_id\":\"\xff\",\"tool_call_id\":\"c\",\"tool\":\"t\",\"arguments\":{}}",
		`{"namespace":"n","session_id":"\ud83d\ude00","tool_call_id":"\ud800","tool":"t","arguments":null,"resumed":true}`,
	} {
		f.Add([]byte(s))
	}
	a := &api{opts: Options{MaxBodyBytes: 1 << 20}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/executions", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		var req host.ToolCall
		if !a.decode(w, r, &req, false) {
			if w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("refused with %d", w.Code)
			}
			return
		}
		doc, err := strictjson.Parse(body)
		if err != nil {
			t.Fatalf("accepted a body the strict parser refuses: %v", err)
		}
		obj := doc.(map[string]any)
		for key, got := range map[string]string{"namespace": req.Namespace, "session_id": req.SessionID, "tool_call_id": req.ToolCallID, "tool": req.Tool} {
			want, _ := obj[key].(string)
			if got != want {
				t.Fatalf("%s decoded as %q, the body holds %q", key, got, want)
			}
		}
		if raw, ok := obj["arguments"]; ok && raw != nil {
			args, err := strictjson.Parse(req.Arguments)
			if err != nil {
				t.Fatalf("arguments %q: %v", req.Arguments, err)
			}
			a, _ := json.Marshal(args)
			b, _ := json.Marshal(raw)
			if !bytes.Equal(a, b) {
				t.Fatalf("arguments decoded as %s, the body holds %s", a, b)
			}
		}
	})
}

// charge is a gated operation whose amount is an integer in minor units,
// as the shipped payments manifest declares it (the noop module stands in
// for the connector).
const charge = `
[connector]
name = "pay"
version = "0.1.0"
abi = 1
module = "noop.wasm"

[[operation]]
name = "echo"
description = "Charge an amount."
effect = "external"
recovery = "manual"
requires_approval = true
money = [{ amount = "amount", currency = "currency" }]
input_schema = '''{"type": "object", "properties": {"amount": {"type": "integer", "minimum": 1},
  "currency": {"type": "string"}}, "required": ["amount", "currency"], "additionalProperties": false}'''
`

// TestExecuteRefusesIntegerSpellings: 500.0, 5e2 and 1e3 pass "type":
// "integer" (JSON Schema calls them integers), and were recorded, shown to
// the reviewer as "5.00 USD" and approved, then failed in the connector,
// which decodes the amount into an integer. They are refused (422
// invalid_arguments, naming the path and the plain spelling) before
// anything is recorded; 500 is recorded.
func TestExecuteRefusesIntegerSpellings(t *testing.T) {
	m, err := manifests.Parse("pay.toml", []byte(charge))
	if err != nil {
		t.Fatal(err)
	}
	env := newTestExecutor(t, m)
	c := client{t: t, base: env.serve(t, Options{}).URL}
	for i, tc := range []struct{ amount, plain string }{{"500.0", "500"}, {"5e2", "500"}, {"1e3", "1000"}, {"5.00E+2", "500"}} {
		p := c.post("/v1/executions", execReq("s1", fmt.Sprint("c", i), "pay.echo", `{"amount":`+tc.amount+`,"currency":"usd"}`)).
			problem(t, CodeInvalidArguments)
		want := []manifests.ArgProblem{{Path: "/amount", Msg: tc.amount + " is an integer written with a fraction or an exponent, which the connector does not read as one: send " + tc.plain}}
		if !reflect.DeepEqual(p.ArgumentErrors, want) {
			t.Errorf("%s: argument errors %+v, want %+v", tc.amount, p.ArgumentErrors, want)
		}
	}
	recs, err := env.ex.Ledger().List(context.Background(), ledger.Filter{Limit: 10})
	if err != nil || len(recs) != 0 {
		t.Fatalf("refused amounts recorded %d executions (%v)", len(recs), err)
	}
	if res := c.post("/v1/executions", execReq("s1", "c9", "pay.echo", `{"amount":500,"currency":"usd"}`)).result(t); res.Status != host.StatusAwaitingApproval {
		t.Fatalf("500: %+v", res)
	}
}
