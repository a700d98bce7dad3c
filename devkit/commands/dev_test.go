package commands

import (
	"strings"
	"testing"

	"github.com/connhost/connhost/manifests"
)

// TestDevBannerSaysAnyoneCanApprove: the banner people read says plainly
// that dev has no tokens.
func TestDevBannerSaysAnyoneCanApprove(t *testing.T) {
	var buf strings.Builder
	renderDevBanner(&buf, "http://127.0.0.1:8420", "http://127.0.0.1:1", "http://127.0.0.1:2", "gated.echo", `{"msg":"x"}`)
	for _, w := range []string{"anyone on this machine can approve, reject and resolve", `recorded as "dev-loopback"`, "connhost approve <approval.id>"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("banner lacks %q:\n%s", w, buf.String())
		}
	}
	if strings.Contains(buf.String(), `"by"`) {
		t.Errorf("banner still suggests a by field:\n%s", buf.String())
	}
}

func TestDevOrigins(t *testing.T) {
	m := &manifests.Manifest{Connector: manifests.Connector{Name: "payments"},
		Capabilities: manifests.Capabilities{HTTP: []string{"https://api.stripe.com:443"}, Config: []string{"api_key", "base_url"}}}
	for url, want := range map[string]string{
		"http://127.0.0.1:7001":      "http://127.0.0.1:7001",
		"http://localhost:7001/v1":   "http://localhost:7001",
		"https://api.stripe.com:443": "", // already allowed
		"https://evil.example:443":   "", // never widened beyond loopback
		"http://127.0.0.1":           "", // no explicit port
	} {
		got := devOrigins(devConfig(url, "", nil))(m)
		if (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
			t.Errorf("base_url %s: got %v, want %q", url, got, want)
		}
	}
	noBase := &manifests.Manifest{Connector: manifests.Connector{Name: "payments"}}
	if got := devOrigins(devConfig("http://127.0.0.1:1", "", nil))(noBase); len(got) != 0 {
		t.Errorf("manifest without base_url: %v", got)
	}
}

// TestDevStartsEmulatorsForTheirConnectors: an emulator starts for the
// shipped connector it stands in for, unless its URL is given; another
// connector alone starts none.
func TestDevStartsEmulatorsForTheirConnectors(t *testing.T) {
	conn := func(name string) *manifests.Manifest {
		return &manifests.Manifest{Connector: manifests.Connector{Name: name}}
	}
	for _, tc := range []struct {
		name                  string
		ms                    []*manifests.Manifest
		paymentsURL, emailURL string
		payments, email       bool
	}{
		{"another connector alone", []*manifests.Manifest{conn("hooks")}, "", "", false, false},
		{"payments", []*manifests.Manifest{conn("hooks"), conn("payments")}, "", "", true, false},
		{"both shipped", []*manifests.Manifest{conn("email"), conn("payments")}, "", "", true, true},
		{"email elsewhere", []*manifests.Manifest{conn("email"), conn("payments")}, "", "http://127.0.0.1:8025", true, false},
	} {
		p, e := emulatorsFor(tc.ms, tc.paymentsURL, tc.emailURL)
		if p != tc.payments || e != tc.email {
			t.Errorf("%s: payments %t email %t, want %t %t", tc.name, p, e, tc.payments, tc.email)
		}
	}
}

// TestDevBannerArguments: the banner's call carries arguments the tool's
// schema accepts — the scaffold's create_item included — never an {} it
// refuses.
func TestDevBannerArguments(t *testing.T) {
	m, err := manifests.Parse("hooks.toml", []byte(`
[connector]
name = "hooks"
version = "0.1.0"
abi = 1
module = "hooks.wasm"
sha256 = ""
[capabilities]
http = ["https://api.example.com:443"]
[[operation]]
name = "create_item"
description = "Create an item with a name and a quantity."
effect = "external"
recovery = "idempotent-retry"
input_schema = """
{"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200},
 "quantity": {"type": "integer", "minimum": 1, "maximum": 1000}, "note": {"type": "string"}},
 "required": ["name", "quantity"], "additionalProperties": false}
"""
[[operation]]
name = "pick"
description = "Pick a colour by its code."
effect = "read"
input_schema = """
{"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-F]{6}$"}}, "required": ["code"], "additionalProperties": false}
"""
`))
	if err != nil {
		t.Fatal(err)
	}
	ms := []*manifests.Manifest{m}
	if got := exampleArgs(ms, "hooks.create_item"); got != `{"name":"example","quantity":1}` {
		t.Errorf("create_item: %s", got)
	}
	if got := exampleArgs(ms, "hooks.pick"); got != "" {
		t.Errorf("pick: %q, want none (no sample satisfies its pattern)", got)
	}
	var buf strings.Builder
	renderDevBanner(&buf, "http://127.0.0.1:8420", "", "", "hooks.pick", "")
	if !strings.Contains(buf.String(), `"arguments":ARGS}`) || !strings.Contains(buf.String(), "ARGS: an object its input schema accepts") ||
		strings.Contains(buf.String(), "payments") || strings.Contains(buf.String(), `"arguments":{}`) {
		t.Errorf("banner:\n%s", buf.String())
	}
}
