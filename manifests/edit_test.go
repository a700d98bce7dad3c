package manifests

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/require"
)

func TestSetOperationField(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		op, key  string
		value    any
		want     string
	}{
		{
			name: "replace keeps spacing and comment",
			in:   "[[operation]]\nname = \"a\"\n  requires_approval   =   true  # gate it\nmax_attempts = 3\n",
			op:   "a", key: "requires_approval", value: false,
			want: "[[operation]]\nname = \"a\"\n  requires_approval   =   false  # gate it\nmax_attempts = 3\n",
		},
		{
			name: "string value",
			in:   "[[operation]]\nname = \"a\"\nrecovery = 'reconcile' # why\n",
			op:   "a", key: "recovery", value: "manual",
			want: "[[operation]]\nname = \"a\"\nrecovery = \"manual\" # why\n",
		},
		{
			name: "insert after name with its indentation and line ending",
			in:   "[[operation]]\r\n  name = \"a\" # first\r\n  effect = \"read\"\r\n",
			op:   "a", key: "requires_approval", value: true,
			want: "[[operation]]\r\n  name = \"a\" # first\r\n  requires_approval = true\r\n  effect = \"read\"\r\n",
		},
		{
			name: "only the named operation",
			in:   "[[operation]]\nname = \"a\"\nmax_attempts = 1\n\n[[operation]]\nname = \"b\"\nmax_attempts = 1\n",
			op:   "b", key: "max_attempts", value: 5,
			want: "[[operation]]\nname = \"a\"\nmax_attempts = 1\n\n[[operation]]\nname = \"b\"\nmax_attempts = 5\n",
		},
		{
			name: "the key inside a multi-line string is not a key",
			in:   "[[operation]]\nname = \"a\"\ndescription = \"\"\"\nrecovery = \"x\"\n\"\"\"\nrecovery = \"reconcile\"\n",
			op:   "a", key: "recovery", value: "manual",
			want: "[[operation]]\nname = \"a\"\ndescription = \"\"\"\nrecovery = \"x\"\n\"\"\"\nrecovery = \"manual\"\n",
		},
		{
			name: "the key of another table is not the operation's",
			in:   "[limits]\nmax_attempts = 2\n[[operation]]\nname = \"a\"\n",
			op:   "a", key: "max_attempts", value: 4,
			want: "[limits]\nmax_attempts = 2\n[[operation]]\nname = \"a\"\nmax_attempts = 4\n",
		},
		{
			name: "the value it has: unchanged, even in another spelling",
			in:   "[[operation]]\nname = \"a\"\nrecovery = 'manual'\n",
			op:   "a", key: "recovery", value: "manual",
			want: "[[operation]]\nname = \"a\"\nrecovery = 'manual'\n",
		},
		{
			name: "an array",
			in:   "[[operation]]\nname = \"a\"\ntags = [\"x\"] # t\n",
			op:   "a", key: "tags", value: []string{"y", "z"},
			want: "[[operation]]\nname = \"a\"\ntags = [\"y\", \"z\"] # t\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetOperationField([]byte(tc.in), tc.op, tc.key, tc.value)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			again, err := SetOperationField(got, tc.op, tc.key, tc.value)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(again), "idempotent")
		})
	}
}

// TestSetOperationFieldShipped makes the variants the crash matrix and the
// demo make of the shipped payments manifest: one operation changes, every
// other line stays as it was, the pin included.
func TestSetOperationFieldShipped(t *testing.T) {
	src, err := os.ReadFile("payments.toml")
	require.NoError(t, err)
	before, err := Parse("payments.toml", src)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, op, key string
		value         any
		check         func(t *testing.T, o *Operation)
	}{
		{"ungate an external operation", "create_payment", "requires_approval", false,
			func(t *testing.T, o *Operation) { require.False(t, o.RequiresApproval) }},
		{"keep a gate", "refund_payment", "requires_approval", true,
			func(t *testing.T, o *Operation) { require.True(t, o.RequiresApproval) }},
		{"gate a read", "get_payment", "requires_approval", true,
			func(t *testing.T, o *Operation) { require.True(t, o.RequiresApproval) }},
		{"declare a payment manual", "create_payment", "recovery", string(PolicyManual),
			func(t *testing.T, o *Operation) { require.Equal(t, PolicyManual, o.Recovery) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := SetOperationField(src, tc.op, tc.key, tc.value)
			require.NoError(t, err)
			after, err := Parse("variant.toml", out)
			require.NoError(t, err)
			require.Equal(t, before.Connector, after.Connector, "the pin and the rest of [connector]")
			for _, op := range before.Operations {
				got, ok := after.Operation(op.Name)
				require.True(t, ok, op.Name)
				if op.Name == tc.op {
					tc.check(t, got)
					continue
				}
				require.Equal(t, op.RequiresApproval, got.RequiresApproval, op.Name)
				require.Equal(t, op.Recovery, got.Recovery, op.Name)
			}
			inLines, outLines := strings.Split(string(src), "\n"), strings.Split(string(out), "\n")
			require.Len(t, outLines, len(inLines), "no line added or removed")
			changed := 0
			for i := range inLines {
				if inLines[i] != outLines[i] {
					changed++
				}
			}
			require.LessOrEqual(t, changed, 1)
		})
	}
}

func TestSetOperationFieldErrors(t *testing.T) {
	const ok = "[[operation]]\nname = \"a\"\nrecovery = \"manual\"\n"
	for _, tc := range []struct {
		name, in, op, key string
		value             any
		want              error
	}{
		{"not TOML", "[[operation]\n", "a", "recovery", "x", ErrSyntax},
		{"no such operation", ok, "b", "recovery", "x", ErrNoOperation},
		{"no operations", "[connector]\nname = \"a\"\n", "a", "recovery", "x", ErrNoOperation},
		{"inline operations", "operation = [{name = \"a\"}]\n", "a", "recovery", "x", ErrNotEditable},
		{"multi-line value", "[[operation]]\nname = \"a\"\nrecovery = \"\"\"\nmanual\"\"\"\n", "a", "recovery", "x", ErrNotEditable},
		{"array over lines", "[[operation]]\nname = \"a\"\ntags = [\n\"x\",\n]\n", "a", "tags", []string{"y"}, ErrNotEditable},
		{"dotted key", ok, "a", "limits.timeout", "1s", ErrNotEditable},
		{"table value", ok, "a", "recovery", map[string]int{"x": 1}, ErrNotEditable},
		{"nil value", ok, "a", "recovery", nil, ErrNotEditable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := SetOperationField([]byte(tc.in), tc.op, tc.key, tc.value)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, out)
		})
	}
}

// FuzzSetOperationField: SetOperationField never panics, and an edit it
// accepts changes the named field of the named operation and nothing else
// a TOML decoder can see.
func FuzzSetOperationField(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.toml")
	files = append(files, "payments.toml", "email.toml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "create_payment", "recovery", "manual")
		f.Add(data, "send", "requires_approval", "true")
		f.Add(data, "echo", "max_attempts", "7")
	}
	f.Add([]byte("[[operation]]\nname = \"a\"\n"), "a", "note", "# not a comment")
	f.Fuzz(func(t *testing.T, data []byte, op, key, value string) {
		var v any = value
		switch value {
		case "true", "false":
			v = value == "true"
		case "7":
			v = 7
		}
		out, err := SetOperationField(data, op, key, v)
		if err != nil {
			return
		}
		var before, after map[string]any
		if _, err := toml.Decode(string(data), &before); err != nil {
			t.Fatalf("accepted text that does not decode: %v", err)
		}
		if _, err := toml.Decode(string(out), &after); err != nil {
			t.Fatalf("the edit does not decode: %v\n%s", err, out)
		}
		i, fields := operationTable(after, op)
		if i < 0 {
			t.Fatalf("operation %q gone after the edit", op)
		}
		_, want, _ := tomlValue(v)
		if !reflect.DeepEqual(fields[key], want) {
			t.Fatalf("%s.%s = %#v, want %#v", op, key, fields[key], want)
		}
		_, old := operationTable(before, op)
		if prev, had := old[key]; had {
			fields[key] = prev
		} else {
			delete(fields, key)
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("the edit changed more than %s.%s:\n%s\n---\n%s", op, key, data, out)
		}
	})
}
