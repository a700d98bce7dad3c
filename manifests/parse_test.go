package manifests

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/BurntSushi/toml"
)

var update = flag.Bool("update", false, "rewrite the '# want:' lines of testdata/invalid/*.toml")

const wantPrefix = "# want: "

// splitWant separates a test file into its manifest text and the "# want:"
// lines at its end.
func splitWant(data string) (text string, want []string) {
	lines := strings.SplitAfter(data, "\n")
	i := len(lines)
	for i > 0 && (strings.HasPrefix(lines[i-1], wantPrefix) || lines[i-1] == "") {
		i--
	}
	for _, l := range lines[i:] {
		if l != "" {
			want = append(want, strings.TrimSuffix(strings.TrimPrefix(l, wantPrefix), "\n"))
		}
	}
	return strings.Join(lines[:i], ""), want
}

// TestParseInvalid parses every testdata/invalid/*.toml and compares the
// reported problems ("line: field: msg") with the "# want:" lines at the
// end of the file. The want lines are appended after the manifest so they
// do not move any line number. Run with -update to rewrite them, then
// review the diff.
func TestParseInvalid(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.toml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			text, want := splitWant(string(data))
			m, err := Parse(f, []byte(text))
			require.Error(t, err)
			require.Nil(t, m)
			require.ErrorIs(t, err, ErrInvalid)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, f, ve.File)
			var got []string
			for _, p := range ve.Problems {
				got = append(got, p.String())
			}
			// Error() prints exactly the problems, prefixed by the file.
			require.Equal(t, f+":"+strings.Join(got, "\n"+f+":"), err.Error())
			if *update {
				var b strings.Builder
				b.WriteString(text)
				for _, g := range got {
					b.WriteString(wantPrefix + g + "\n")
				}
				require.NoError(t, os.WriteFile(f, []byte(b.String()), 0o644))
				return
			}
			require.Equal(t, want, got)
		})
	}
}

func TestParseSyntaxErrorKeepsParseError(t *testing.T) {
	_, err := Parse("bad.toml", []byte("[connector]\nname = \"x\nversion = 1\n"))
	require.ErrorIs(t, err, ErrSyntax)
	require.ErrorIs(t, err, ErrInvalid)
	var pe toml.ParseError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 2, pe.Position.Line)
	require.True(t, strings.HasPrefix(err.Error(), "bad.toml:2:10: toml: "), err.Error())
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, Problem{Line: 2, Column: 10, Msg: ve.Problems[0].Msg}, ve.Problems[0], "line and column of the syntax error")
}

func TestParseValid(t *testing.T) {
	m, err := Load("testdata/valid.toml")
	require.NoError(t, err)
	require.Equal(t, "testdata/valid.toml", m.Path)
	require.Len(t, m.Digest, 64)
	require.Equal(t, Connector{
		Name: "payments", Version: "1.2.0-rc.1", ABI: 1, Module: "payments.wasm",
		SHA256: strings.Repeat("0", 64),
	}, m.Connector)
	require.Equal(t, Capabilities{
		HTTP:           []string{"https://api.stripe.com:443", "http://127.0.0.1:8080"},
		Config:         []string{"api_key", "base_url"},
		ConfigOptional: []string{"base_url"},
	}, m.Capabilities)
	require.Equal(t, []string{"api_key"}, m.Capabilities.RequiredConfig())
	require.Equal(t, Limits{MemoryMiB: 128, Timeout: 30 * time.Second, MaxOutputKiB: 512, Instances: 8, LogKiB: 32, LogRecords: 100}, m.Limits)
	require.Equal(t, Provider{Name: "Stripe", IdempotencyHeader: "Idempotency-Key", IdempotencyRetention: 24 * time.Hour}, m.Provider)
	require.Len(t, m.Operations, 2)

	op, ok := m.Operation("create_payment")
	require.True(t, ok)
	require.Equal(t, EffectExternal, op.Effect)
	require.Equal(t, PolicyIdempotentRetry, op.Recovery)
	require.True(t, op.RequiresApproval)
	require.Equal(t, 2*time.Hour, op.ApprovalTTL)
	require.Equal(t, 5, op.MaxAttempts)
	require.Equal(t, 25, op.Line)
	require.NotNil(t, op.Schema())

	read, ok := m.Operation("get_payment")
	require.True(t, ok)
	require.Equal(t, EffectRead, read.Effect)
	require.Equal(t, Policy(""), read.Recovery, "a read may omit recovery")
	require.Equal(t, DefaultApprovalTTL, read.ApprovalTTL)
	require.Equal(t, DefaultMaxAttempts, read.MaxAttempts)

	_, ok = m.Operation("nope")
	require.False(t, ok)
}

func TestParseDefaults(t *testing.T) {
	m, err := Load("testdata/minimal.toml")
	require.NoError(t, err)
	require.Equal(t, "", m.Connector.SHA256, "unpinned is allowed by the parser")
	require.Equal(t, Limits{MemoryMiB: 64, Timeout: 15 * time.Second, MaxOutputKiB: 256, Instances: 4, LogKiB: 64, LogRecords: 256}, m.Limits)
	require.Empty(t, m.Capabilities.HTTP)
	op := m.Operations[0]
	require.False(t, op.RequiresApproval)
	require.Equal(t, time.Hour, op.ApprovalTTL)
	require.Equal(t, 3, op.MaxAttempts)
}

func TestModulePath(t *testing.T) {
	m, err := Load("testdata/minimal.toml")
	require.NoError(t, err)
	require.Equal(t, filepath.Join("testdata", "echo.wasm"), m.ModulePath(""))
	require.Equal(t, filepath.Join("/opt/mods", "echo.wasm"), m.ModulePath("/opt/mods"))
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("testdata/does-not-exist.toml")
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, "testdata/valid.toml", filepath.Join(dir, "b.toml"))
	copyFile(t, "testdata/minimal.toml", filepath.Join(dir, "a.toml"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o644))
	// A crashtest probe config next to its manifest is no manifest.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.probe.toml"), []byte("[operation.x]\nargs = '{}'\n"), 0o644))
	ms, err := LoadDir(dir)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, "echo", ms[0].Connector.Name, "sorted by file name")
	require.Equal(t, "payments", ms[1].Connector.Name)

	// Every broken file is reported, and a duplicate connector name too.
	copyFile(t, "testdata/invalid/abi_version.toml", filepath.Join(dir, "c.toml"))
	copyFile(t, "testdata/invalid/syntax.toml", filepath.Join(dir, "d.toml"))
	copyFile(t, "testdata/minimal.toml", filepath.Join(dir, "e.toml"))
	ms, err = LoadDir(dir)
	require.Nil(t, ms)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, err, ErrSyntax)
	require.ErrorIs(t, err, ErrDuplicateConnector)
	require.Contains(t, err.Error(), "c.toml:")
	require.Contains(t, err.Error(), "d.toml:2:")

	empty, err := LoadDir(t.TempDir())
	require.NoError(t, err)
	require.Empty(t, empty)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	if strings.Contains(from, "invalid") {
		data = []byte(func() string { s, _ := splitWant(string(data)); return s }())
	}
	require.NoError(t, os.WriteFile(to, data, 0o644))
}

// TestLineIndexIgnoresStringContents proves that headers and keys written
// inside multi-line strings and arrays do not move reported lines.
func TestLineIndexIgnoresStringContents(t *testing.T) {
	src := `[connector]
name = "x"
note = """
[[operation]]
recovery = "fake"
"""
http = [
  "a=b", # key = value
]
[[operation]]
name = 'o'
schema = '''
name = 1
'''
recovery = "r"
[[operation]]
"quoted key" = 1
`
	idx := indexLines([]byte(src))
	require.Equal(t, lineIndex{
		"connector": 1, "connector.name": 2, "connector.note": 3, "connector.http": 7,
		"operation#0": 10, "operation#0.name": 11, "operation#0.schema": 12, "operation#0.recovery": 15,
		"operation#1": 16, "operation#1.quoted key": 17,
	}, idx)
}

// TestShippedManifestsParse loads every manifest shipped in this directory
// (email.toml, payments.toml, ...) and fails on any problem.
func TestShippedManifestsParse(t *testing.T) {
	files, err := Files(".") // the probe configs next to them are no manifests
	require.NoError(t, err)
	require.NotEmpty(t, files)
	t.Logf("%d shipped manifests: %v", len(files), files)
	for _, f := range files {
		m, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if m.Connector.SHA256 == "" {
			t.Logf("%s: module digest not pinned (run connhost build --pin)", f)
		}
	}
	ms, err := LoadDir(".")
	require.NoError(t, err)
	require.Len(t, ms, len(files))
}

func TestErrorsAreDistinct(t *testing.T) {
	all := []error{ErrInvalid, ErrSyntax, ErrInvalidArgs, ErrDuplicateConnector, ErrBadDigest, ErrNoConnectorTable}
	for i, a := range all {
		require.True(t, strings.HasPrefix(a.Error(), "manifests: "), a.Error())
		for j, b := range all {
			if i != j {
				require.False(t, errors.Is(a, b))
			}
		}
	}
}

// ReconcileSettle defaults to the operation's timeout and may be declared
// down to zero on a reconcile operation.
func TestReconcileSettle(t *testing.T) {
	const head = "[connector]\nname = \"s\"\nversion = \"0.1.0\"\nabi = 1\nmodule = \"s.wasm\"\n[limits]\ntimeout = \"7s\"\n"
	const op = "[[operation]]\nname = %q\ndescription = \"Send a message, reconciled.\"\neffect = \"external\"\nrecovery = \"reconcile\"\n%sinput_schema = '{\"type\": \"object\"}'\n"
	m, err := Parse("s.toml", []byte(head+fmt.Sprintf(op, "dflt", "")+fmt.Sprintf(op, "zero", "reconcile_settle = \"0s\"\n")))
	require.NoError(t, err)
	dflt, _ := m.Operation("dflt")
	zero, _ := m.Operation("zero")
	require.Equal(t, 14*time.Second, dflt.ReconcileSettle, "default: twice limits.timeout")
	require.Equal(t, time.Duration(0), zero.ReconcileSettle)
}

// OutcomeDurability defaults to lazy where recovery re-derives a lost
// outcome and to sync elsewhere; sync may always be declared.
func TestOutcomeDurability(t *testing.T) {
	const head = "[connector]\nname = \"s\"\nversion = \"0.1.0\"\nabi = 1\nmodule = \"s.wasm\"\n"
	const op = "[[operation]]\nname = %q\ndescription = \"An operation of the test.\"\neffect = %q\n%sinput_schema = '{\"type\": \"object\"}'\n"
	m, err := Parse("s.toml", []byte(head+
		fmt.Sprintf(op, "keyed", "external", "recovery = \"idempotent-retry\"\n")+
		fmt.Sprintf(op, "found", "external", "recovery = \"reconcile\"\n")+
		fmt.Sprintf(op, "human", "external", "recovery = \"manual\"\n")+
		fmt.Sprintf(op, "look", "read", "")+
		fmt.Sprintf(op, "strict", "external", "recovery = \"idempotent-retry\"\noutcome_durability = \"sync\"\n")))
	require.NoError(t, err)
	for name, want := range map[string]Durability{"keyed": DurabilityLazy, "found": DurabilityLazy, "human": DurabilitySync, "look": DurabilitySync, "strict": DurabilitySync} {
		o, _ := m.Operation(name)
		require.Equal(t, want, o.OutcomeDurability, name)
	}
}

// TestShippedReviewAndDuplicateGuard: the shipped payments and email
// operations a reviewer approves name what the reviewer decides on, and
// the two whose repeats cost money or reach people carry the
// duplicate-intent guard.
func TestShippedReviewAndDuplicateGuard(t *testing.T) {
	ms, err := LoadDir(".")
	require.NoError(t, err)
	ops := map[string]*Operation{}
	for _, m := range ms {
		for _, op := range m.Operations {
			ops[m.Connector.Name+"."+op.Name] = op
		}
	}
	pay := ops["payments.create_payment"]
	require.Equal(t, []string{"amount", "currency", "payment_method", "customer_email"}, pay.Review)
	require.Equal(t, []Money{{Amount: "amount", Currency: "currency"}}, pay.Money)
	require.Equal(t, 10*time.Minute, pay.DuplicateWindow)
	require.Equal(t, DuplicateHold, pay.OnDuplicate)
	send := ops["email.send"]
	require.Equal(t, []string{"to", "cc", "from", "subject"}, send.Review)
	require.Equal(t, 10*time.Minute, send.DuplicateWindow)
	require.Equal(t, DuplicateHold, send.OnDuplicate)
	require.Equal(t, []Money{{Amount: "amount"}}, ops["payments.refund_payment"].Money)
	for name, op := range ops {
		if op.RequiresApproval {
			require.NotEmpty(t, op.Review, "%s is approved by a reviewer: name what they decide on", name)
		}
		if op.Effect == EffectRead {
			require.Zero(t, op.DuplicateWindow, name)
			require.Empty(t, op.OnDuplicate, name)
		}
	}
}

func TestReviewKeysParse(t *testing.T) {
	src := `[connector]
name = "shop"
version = "1.0.0"
abi = 1
module = "shop.wasm"

[[operation]]
name = "order"
description = "Place an order."
effect = "external"
recovery = "manual"
review = ["total.amount", "ship_to"]
money = [{ amount = "total.amount", currency = "total.currency" }, { amount = "tip" }]
duplicate_window = "90s"
on_duplicate = "answer"
input_schema = '''{"type": "object", "properties": {"ship_to": {"type": "string"}, "tip": {"type": ["integer", "null"]},
  "total": {"$ref": "#/$defs/money"}}, "$defs": {"money": {"type": "object", "properties": {
  "amount": {"type": "integer"}, "currency": {"type": "string"}}}}}'''
`
	m, err := Parse("shop.toml", []byte(src))
	require.NoError(t, err)
	op := m.Operations[0]
	require.Equal(t, []string{"total.amount", "ship_to"}, op.Review)
	require.Equal(t, []Money{{"total.amount", "total.currency"}, {"tip", ""}}, op.Money)
	require.Equal(t, 90*time.Second, op.DuplicateWindow)
	require.Equal(t, DuplicateAnswer, op.OnDuplicate)
	require.Equal(t, 13, op.KeyLine("money"))
	// None of them is part of what an approval vouches for.
	bare, err := Parse("shop.toml", []byte(strings.NewReplacer(
		`review = ["total.amount", "ship_to"]`+"\n", "",
		`money = [{ amount = "total.amount", currency = "total.currency" }, { amount = "tip" }]`+"\n", "",
		`duplicate_window = "90s"`+"\n", "", `on_duplicate = "answer"`+"\n", "").Replace(src)))
	require.NoError(t, err)
	require.Equal(t, bare.Operations[0].PolicyVersion(), op.PolicyVersion())
	require.Zero(t, bare.Operations[0].DuplicateWindow)
	require.Empty(t, bare.Operations[0].OnDuplicate)
}
