package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustLoad(t *testing.T, path string) *Manifest {
	t.Helper()
	m, err := Load(path)
	require.NoError(t, err)
	return m
}

func TestValidateArgs(t *testing.T) {
	op, _ := mustLoad(t, "testdata/valid.toml").Operation("create_payment")
	for _, tc := range []struct {
		name string
		args string
		want []ArgProblem // nil: valid
	}{
		{name: "valid", args: `{"amount": 100, "currency": "usd"}`},
		{name: "valid with format", args: `{"amount": 1, "currency": "eur", "email": "a@example.com"}`},
		{name: "missing required", args: `{}`,
			want: []ArgProblem{{"", "missing properties 'amount', 'currency'"}}},
		{name: "every failing path listed", args: `{"amount": 0, "currency": "gbp", "extra": true}`,
			want: []ArgProblem{
				{"", "additional properties 'extra' not allowed"},
				{"/amount", "minimum: got 0, want 1"},
				{"/currency", "value must be one of 'usd', 'eur'"},
			}},
		{name: "wrong type", args: `{"amount": "100", "currency": "usd"}`,
			want: []ArgProblem{{"/amount", "got string, want integer"}}},
		{name: "format asserted", args: `{"amount": 1, "currency": "usd", "email": "nope"}`,
			want: []ArgProblem{{"/email", "'nope' is not valid email: missing @"}}},
		{name: "not an object", args: `[1, 2]`,
			want: []ArgProblem{{"", "arguments must be a JSON object"}}},
		{name: "null", args: `null`,
			want: []ArgProblem{{"", "arguments must be a JSON object"}}},
		{name: "not JSON", args: `{"amount": 1,`,
			want: []ArgProblem{{"", "not valid JSON: unexpected EOF"}}},
		{name: "trailing data", args: `{} {}`,
			want: []ArgProblem{{"", "not valid JSON: invalid character after top-level value"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := op.ValidateArgs([]byte(tc.args))
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidArgs)
			var ae *ArgsError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, "create_payment", ae.Operation)
			require.Equal(t, tc.want, ae.Problems)
			for _, p := range tc.want {
				require.Contains(t, err.Error(), p.Msg)
			}
		})
	}
}

func TestValidateArgsHandBuiltOperation(t *testing.T) {
	op := &Operation{Name: "x", InputSchema: `{"type":"object","required":["a"]}`}
	require.NoError(t, op.ValidateArgs([]byte(`{"a":1}`)))
	require.ErrorIs(t, op.ValidateArgs([]byte(`{}`)), ErrInvalidArgs)
	bad := &Operation{Name: "y", InputSchema: `nope`}
	require.ErrorIs(t, bad.ValidateArgs([]byte(`{}`)), ErrInvalidArgs)
}

func TestSchemaJSON(t *testing.T) {
	m := mustLoad(t, "testdata/valid.toml")
	raw := m.Operations[0].SchemaJSON()
	require.True(t, json.Valid(raw))
	require.False(t, strings.ContainsAny(string(raw), "\n"), "compact")
	require.True(t, strings.HasPrefix(string(raw), `{"type":"object","properties":{"amount":`), string(raw))
}

// TestPolicyVersion proves that the policy version changes with every
// policy field and with nothing else.
func TestPolicyVersion(t *testing.T) {
	m := mustLoad(t, "testdata/valid.toml")
	base, _ := m.Operation("create_payment")
	v := base.PolicyVersion()
	require.Len(t, v, 16)
	// Pinned: approvals recorded by earlier builds must keep matching;
	// without a [provider] table the version is what it always was.
	noProvider := *base
	noProvider.provider = Provider{}
	require.Equal(t, "1824eacbd2d1bd70", noProvider.PolicyVersion())
	require.Equal(t, "52ca3d48a8efaa25", v)

	again := mustLoad(t, "testdata/valid.toml").Operations[0]
	require.Equal(t, v, again.PolicyVersion(), "deterministic")

	for _, tc := range []struct {
		name   string
		mutate func(op *Operation)
		same   bool
	}{
		{name: "connector", mutate: func(op *Operation) { op.connector = "payments2" }},
		{name: "version", mutate: func(op *Operation) { op.version = "1.2.1" }},
		{name: "name", mutate: func(op *Operation) { op.Name = "create_payment2" }},
		{name: "effect", mutate: func(op *Operation) { op.Effect = EffectRead }},
		{name: "recovery", mutate: func(op *Operation) { op.Recovery = PolicyReconcile }},
		{name: "approval", mutate: func(op *Operation) { op.RequiresApproval = false }},
		{name: "ttl", mutate: func(op *Operation) { op.ApprovalTTL = time.Hour }},
		{name: "attempts", mutate: func(op *Operation) { op.MaxAttempts = 4 }},
		{name: "retention", mutate: func(op *Operation) { op.provider.IdempotencyRetention = time.Hour }},
		{name: "idempotency header", mutate: func(op *Operation) { op.provider.IdempotencyHeader = "X-Request-Id" }},
		{name: "idempotency field instead", mutate: func(op *Operation) {
			op.provider.IdempotencyField, op.provider.IdempotencyHeader = op.provider.IdempotencyHeader, ""
		}},
		{name: "provider name", mutate: func(op *Operation) { op.provider.Name = "Stripe, Inc." }, same: true},
		{name: "description", mutate: func(op *Operation) { op.Description = "other" }, same: true},
		{name: "schema", mutate: func(op *Operation) { op.InputSchema = "{}" }, same: true},
		{name: "line", mutate: func(op *Operation) { op.Line = 1 }, same: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := *base
			tc.mutate(&op)
			if tc.same {
				require.Equal(t, v, op.PolicyVersion())
			} else {
				require.NotEqual(t, v, op.PolicyVersion())
			}
		})
	}
}

const digestA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestSetSHA256(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			name: "replace keeps comment and spacing",
			in:   "[connector]\nname = \"x\"\nmodule = \"x.wasm\"\n  sha256   =   \"\"  # pinned by build\n[limits]\n",
			want: "[connector]\nname = \"x\"\nmodule = \"x.wasm\"\n  sha256   =   \"" + digestA + "\"  # pinned by build\n[limits]\n",
		},
		{
			name: "insert after module with its indentation",
			in:   "# top\n[connector]\n  name = \"x\"\n  module = \"x.wasm\" # file\n  abi = 1\n",
			want: "# top\n[connector]\n  name = \"x\"\n  module = \"x.wasm\" # file\n  sha256 = \"" + digestA + "\"\n  abi = 1\n",
		},
		{
			name: "insert after header without module",
			in:   "[connector]\nname = \"x\"\n",
			want: "[connector]\nsha256 = \"" + digestA + "\"\nname = \"x\"\n",
		},
		{
			name: "crlf kept",
			in:   "[connector]\r\nmodule = \"x.wasm\"\r\nabi = 1\r\n",
			want: "[connector]\r\nmodule = \"x.wasm\"\r\nsha256 = \"" + digestA + "\"\r\nabi = 1\r\n",
		},
		{
			name: "sha256 of another table untouched",
			in:   "[other]\nsha256 = \"keep\"\n[connector]\nmodule = 'x.wasm'\nsha256 = 'old'\n",
			want: "[other]\nsha256 = \"keep\"\n[connector]\nmodule = 'x.wasm'\nsha256 = \"" + digestA + "\"\n",
		},
		{
			name: "sha256 text inside a multi-line string is not a key",
			in:   "[connector]\nnote = \"\"\"\nsha256 = \"x\"\n\"\"\"\nmodule = \"x.wasm\"\n",
			want: "[connector]\nnote = \"\"\"\nsha256 = \"x\"\n\"\"\"\nmodule = \"x.wasm\"\nsha256 = \"" + digestA + "\"\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetSHA256([]byte(tc.in), digestA)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			// Idempotent.
			again, err := SetSHA256(got, digestA)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(again))
		})
	}
}

func TestSetSHA256RoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/minimal.toml")
	require.NoError(t, err)
	out, err := SetSHA256(data, digestA)
	require.NoError(t, err)
	m, err := Parse("pinned.toml", out)
	require.NoError(t, err)
	require.Equal(t, digestA, m.Connector.SHA256)
	require.True(t, strings.HasPrefix(string(out), "# The smallest valid manifest"), "comments kept")
}

func TestSetSHA256Errors(t *testing.T) {
	_, err := SetSHA256([]byte("[connector]\n"), "ABC")
	require.ErrorIs(t, err, ErrBadDigest)
	_, err = SetSHA256([]byte("[connector]\n"), strings.ToUpper(digestA))
	require.ErrorIs(t, err, ErrBadDigest)
	_, err = SetSHA256([]byte("[limits]\n"), digestA)
	require.ErrorIs(t, err, ErrNoConnectorTable)
	_, err = SetSHA256([]byte("[connector\n"), digestA)
	require.ErrorIs(t, err, ErrSyntax)
	_, err = SetSHA256([]byte("[connector]\nsha256 = \"\"\"\nx\"\"\"\n"), digestA)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestPinFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.toml")
	copyFile(t, "testdata/minimal.toml", path)
	require.NoError(t, os.Chmod(path, 0o600))
	require.NoError(t, PinFile(path, digestA))
	m := mustLoad(t, path)
	require.Equal(t, digestA, m.Connector.SHA256)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")

	require.ErrorIs(t, PinFile(path, "x"), ErrBadDigest)
	require.ErrorIs(t, PinFile(filepath.Join(t.TempDir(), "none.toml"), digestA), os.ErrNotExist)
}

// FuzzParse: Parse never panics, never returns both a manifest and an
// error, and every error is a *ValidationError. Accepted manifests satisfy
// the invariants the host relies on.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/*.toml", "testdata/invalid/*.toml"} {
		files, _ := filepath.Glob(dir)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("fuzz.toml", data)
		if err != nil {
			if m != nil {
				t.Fatal("manifest and error")
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 || !errors.Is(err, ErrInvalid) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			lines := bytes.Count(data, []byte("\n")) + 1
			for _, p := range ve.Problems {
				if p.Line < 0 || p.Line > lines || p.Column < 0 {
					t.Fatalf("problem outside the file (%d lines): %+v", lines, p)
				}
			}
			_ = err.Error()
			return
		}
		if len(m.Operations) == 0 || m.Connector.ABI != 1 || m.Limits.MemoryMiB == 0 || m.Limits.Timeout == 0 {
			t.Fatalf("accepted manifest breaks invariants: %+v", m)
		}
		for _, op := range m.Operations {
			if op.Schema() == nil || op.MaxAttempts < 1 || op.PolicyVersion() == "" {
				t.Fatalf("accepted operation breaks invariants: %+v", op)
			}
			if op.Effect == EffectExternal && op.Recovery == "" {
				t.Fatal("external operation without recovery")
			}
			_ = op.ValidateArgs([]byte(`{}`))
			_ = op.IntentDigest(map[string]any{})
			lines := bytes.Count(data, []byte("\n")) + 1
			for ptr := range jsonPointerOffsets(op.InputSchema) {
				if p := op.SchemaPos(ptr); p.Line < 1 || p.Line > lines {
					t.Fatalf("schema pointer %q at %+v, outside the file's %d lines", ptr, p, lines)
				}
			}
		}
		if out, err := SetSHA256(data, digestA); err == nil {
			pinned, err := Parse("pinned.toml", out)
			if err != nil {
				t.Fatalf("pinning broke a valid manifest: %v\n%s", err, out)
			}
			if pinned.Connector.SHA256 != digestA {
				t.Fatalf("pinned digest %q", pinned.Connector.SHA256)
			}
		}
	})
}
