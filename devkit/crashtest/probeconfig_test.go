package crashtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

const goodProbe = `# a provider without a probe contract
[probe]
headers = { Authorization = "Bearer {env.TOKEN}" }

[operation.create_item]
hold = "POST /api/collections/{c}/records"
args = '{"name": "crashtest {unique}", "quantity": 1}'
receipt = "GET /api/collections/items/records/{receipt}"

[operation.create_item.effects]
count = "GET /api/collections/items/records?perPage=1"
json = "totalItems"

[operation.delete_item]
hold = "DELETE /api/collections/items/records/{id}"
args = '{"id": "{setup.id}"}'
receipt = "none"
effects = { count = "GET /api/collections/items/records?perPage=1", json = "totalItems", removes = true }
setup = { request = "POST /api/collections/items/records", body = '{"name": "doomed {unique}", "quantity": 1}' }

[operation.charge]
args = '{"amount": 500}'
effects.answers = "POST /v1/charges"
effects.unless_header = "Idempotent-Replayed: true"
`

func TestParseProbeConfig(t *testing.T) {
	cfg, err := ParseProbeConfig("p.toml", []byte(goodProbe), env(map[string]string{"TOKEN": "t0k"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Headers["Authorization"]; got != "Bearer t0k" {
		t.Errorf("headers: %q", got)
	}
	c := cfg.Operations["create_item"]
	if c == nil || c.Line != 5 || c.Effects.Count != "/api/collections/items/records?perPage=1" || c.Effects.JSON != "totalItems" ||
		c.Receipt != "/api/collections/items/records/{receipt}" || c.Hold.String() != "POST /api/collections/{c}/records" {
		t.Fatalf("create_item: %+v", c)
	}
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/api/collections/items/records", true},
		{"post", "/api/collections/other/records", true},
		{"GET", "/api/collections/items/records", false},
		{"POST", "/api/collections/items/records/x", false},
		{"POST", "/api/collections//records", false},
		{"POST", "/api/collections/items", false},
	} {
		if got := c.Hold.Match(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s matched %t, want %t", tc.method, tc.path, got, tc.want)
		}
	}
	d := cfg.Operations["delete_item"]
	if d == nil || !d.Effects.Removes || !d.NoReceipt || d.Setup == nil || d.Setup.Method != "POST" || d.Setup.ContentType != "application/json" {
		t.Fatalf("delete_item: %+v %+v", d, d.Setup)
	}
	ch := cfg.Operations["charge"]
	if ch == nil || ch.Effects.Answers.String() != "POST /v1/charges" || ch.Effects.UnlessHeader != "Idempotent-Replayed" || ch.Effects.UnlessValue != "true" {
		t.Fatalf("charge: %+v", ch.Effects)
	}
}

// TestParseProbeConfigProblems: every problem is reported at once, each
// with its line.
func TestParseProbeConfigProblems(t *testing.T) {
	src := `[probe]
headers = { Authorization = "{env.MISSING}" }
colour = "blue"

[operation.send]
hold = "SEND /x"
args = '{"to": '
receipt = "GET /messages/42"

[operation.send.effects]
count = "POST /messages"

[operation.get]
args = '{"id": "{setup.id}"}'
effects = { answers = "POST /x?y=1", json = "n" }
extra = 1

[operation.del]
setup = { body = "{}" }
hold = "DELETE /x/{id...}/y"
receipt = "GET /x/{receipt}?q={setup.id}"
`
	_, err := ParseProbeConfig("p.toml", []byte(src), env(nil))
	var pe *ProbeConfigError
	if !errors.As(err, &pe) || !errors.Is(err, ErrProbeConfig) {
		t.Fatalf("error %v", err)
	}
	for _, want := range []string{
		"p.toml:2: probe.headers.Authorization: environment variable MISSING ({env.MISSING}) is not set",
		`p.toml:3: probe.colour: unknown key "colour" (known: headers)`,
		`p.toml:6: operation.send.hold: pattern "SEND /x": want "METHOD /path"`,
		"p.toml:7: operation.send.args: not JSON",
		`p.toml:8: operation.send.receipt: "GET /messages/42" does not name the receipt`,
		"p.toml:11: operation.send.effects.count: effects are counted with GET, not POST",
		"p.toml:14: operation.get.args: args name {setup.…} but the operation has no setup",
		`p.toml:15: operation.get.effects.answers: pattern "POST /x?y=1": the query is not matched`,
		`p.toml:16: operation.get.extra: unknown key "extra"`,
		`p.toml:19: operation.del.setup: setup needs request = "METHOD /path"`,
		`p.toml:20: operation.del.hold: pattern "DELETE /x/{id...}/y": {name...} must be the last segment`,
		"p.toml:21: operation.del.receipt: {setup.id} has no value here",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := ParseProbeConfig("bad.toml", []byte("[operation\n"), nil); err == nil || !strings.HasPrefix(err.Error(), "bad.toml:2:11: toml: ") {
		t.Errorf("syntax error: %v", err)
	}
}

func TestLookupJSON(t *testing.T) {
	v, err := decodeJSON([]byte(`{"data": [{"id": "a"}, {"id": "b"}], "total": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"data.1.id": "b", "total": "2"} {
		got, err := lookupJSON(v, path)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("%s = %v, %v", path, got, err)
		}
	}
	for path, want := range map[string]string{
		"data.2.id": "data holds an array of 2, no element \"2\"",
		"missing":   `no "missing" at the answer`,
		"total.x":   "total is a number, not an object or array",
	} {
		if _, err := lookupJSON(v, path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}

// FuzzParseProbeConfig: any input is a config or a *ProbeConfigError,
// never a panic; a config's patterns match without panicking.
func FuzzParseProbeConfig(f *testing.F) {
	f.Add(goodProbe)
	f.Add("[operation.x]\nhold = \"POST /{a...}\"\nargs = '{}'\n")
	f.Add("[operation.x.effects]\ncount = \"GET /n\"\njson = \"a.0.b\"\nremoves = true\n")
	f.Add("[operation.x]\nsetup = { request = \"POST /s\", body = 'a={unique}', content_type = \"application/x-www-form-urlencoded\" }\nargs = '{\"id\": \"{setup.id}\"}'\n")
	f.Add("[probe]\nheaders = { \"X-A\" = \"{env.A}\" }\n")
	f.Fuzz(func(t *testing.T, src string) {
		cfg, err := ParseProbeConfig("f.toml", []byte(src), env(map[string]string{"A": "a", "TOKEN": "t"}))
		if err != nil {
			var pe *ProbeConfigError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		for _, op := range cfg.Operations {
			op.Hold.Match("POST", "/a/b")
			op.Effects.Answers.Match("GET", "/")
		}
	})
}

// FuzzProviderAnswer: a provider's answer (untrusted bytes) looked up by a
// config's JSON path, as the probe counts effects and fills setup values,
// is a value or an error, never a panic.
func FuzzProviderAnswer(f *testing.F) {
	f.Add([]byte(`{"totalItems": 3, "items": []}`), "totalItems")
	f.Add([]byte(`{"data": [{"id": "a"}, {"id": "b"}]}`), "data.1.id")
	f.Add([]byte(`[1, 2, 3]`), "0")
	f.Add([]byte(`{"a": {"b": null}}`), "a.b.c")
	f.Add([]byte(`{"n": 1e400}`), "n")
	f.Add([]byte(`not json`), "x")
	f.Fuzz(func(t *testing.T, answer []byte, path string) {
		v, err := decodeJSON(answer)
		if err != nil {
			return
		}
		_, _ = lookupJSON(v, path)
	})
}
