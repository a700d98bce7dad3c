package manifests

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// integerSchema asks for integers directly, in an array, in every branch
// of an anyOf, through a $ref and in a nested object, and for a number
// beside them.
const integerSchema = `[connector]
name = "ints"
version = "1.0.0"
abi = 1
module = "ints.wasm"

[[operation]]
name = "op"
description = "Integers spelled every way."
effect = "external"
recovery = "manual"
input_schema = '''
{
  "type": "object",
  "$defs": {"count": {"type": "integer", "minimum": 0}},
  "properties": {
    "amount": {"type": "integer", "minimum": 1, "maximum": 99999999},
    "price":  {"type": "number"},
    "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    "loose":  {"anyOf": [{"type": "integer"}, {"type": "number", "maximum": 100}]},
    "counts": {"type": "array", "items": {"$ref": "#/$defs/count"}},
    "nested": {"type": "object", "properties": {"qty": {"type": "integer"}}}
  }
}
'''
`

// TestIntegerSpellings: where the schema asks for an integer, a value the
// schema accepts as one but written with a fraction or an exponent (the
// connector's integer decoding fails on it) is refused with the plain
// spelling to send instead; the same spellings of a number are kept.
func TestIntegerSpellings(t *testing.T) {
	m, err := Parse("ints.toml", []byte(integerSchema))
	require.NoError(t, err)
	op, _ := m.Operation("op")
	for _, tc := range []struct {
		name string
		args string
		want []ArgProblem // nil: valid
	}{
		{name: "plain", args: `{"amount": 500, "counts": [0, 7], "nested": {"qty": 2}, "either": 3}`},
		{name: "numbers keep their spellings", args: `{"price": 5.0, "loose": 5.5, "other": 1e3}`},
		{name: "fraction", args: `{"amount": 500.0}`,
			want: []ArgProblem{{"/amount", "500.0 is an integer written with a fraction or an exponent, which the connector does not read as one: send 500"}}},
		{name: "exponent", args: `{"amount": 5e2}`,
			want: []ArgProblem{{"/amount", "5e2 is an integer written with a fraction or an exponent, which the connector does not read as one: send 500"}}},
		{name: "upper-case exponent with a fraction", args: `{"amount": 1.0E3}`,
			want: []ArgProblem{{"/amount", "1.0E3 is an integer written with a fraction or an exponent, which the connector does not read as one: send 1000"}}},
		{name: "in an array through a ref, in an object, in an anyOf", args: `{"counts": [1, 2.00], "nested": {"qty": 2e0}, "either": 3.0, "loose": 1e3}`,
			want: []ArgProblem{
				{"/counts/1", "2.00 is an integer written with a fraction or an exponent, which the connector does not read as one: send 2"},
				{"/either", "3.0 is an integer written with a fraction or an exponent, which the connector does not read as one: send 3"},
				{"/loose", "1e3 is an integer written with a fraction or an exponent, which the connector does not read as one: send 1000"},
				{"/nested/qty", "2e0 is an integer written with a fraction or an exponent, which the connector does not read as one: send 2"},
			}},
		{name: "a fraction that is not an integer is the schema's type error", args: `{"amount": 500.5}`,
			want: []ArgProblem{{"/amount", "got number, want integer"}}},
		{name: "an enormous exponent", args: `{"counts": [1e400]}`,
			want: []ArgProblem{{"/counts/0", "1e400 is an integer written with a fraction or an exponent, which the connector does not read as one: send it in plain digits"}}},
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
			require.Equal(t, tc.want, ae.Problems)
		})
	}
}

// TestBump: which spellings are integers, and the value each is
// replaced by, exactly or roughly.
func TestBump(t *testing.T) {
	for _, tc := range []struct {
		in, bumped, plain string
		ok                bool
	}{
		{"500", "", "", false},
		{"500.0", "500.5", "500", true},
		{"-5e2", "-499.5", "-500", true},
		{"2.50e1", "25.5", "25", true},
		{"25e-1", "", "", false},
		{"0.0", "0.5", "0", true},
		{"1e-400", "", "", false},
		{"1e400", "0.5", "it in plain digits", true},
		{"1e99999999999999999999", "0.5", "it in plain digits", true},
		{"1e-99999999999999999999", "", "", false},
		{"0e99999999999999999999", "", "", false},
	} {
		bumped, plain, ok := bump(tc.in)
		if bumped != tc.bumped || plain != tc.plain || ok != tc.ok {
			t.Errorf("bump(%q) = %q, %q, %v; want %q, %q, %v", tc.in, bumped, plain, ok, tc.bumped, tc.plain, tc.ok)
		}
	}
}

// FuzzBump: for any JSON number, bump marks exactly the integers written
// with a fraction or an exponent (checked with math/big where the
// spelling is short), and what it puts in their place is no integer.
func FuzzBump(f *testing.F) {
	for _, s := range []string{"500", "500.0", "5e2", "1E3", "-0.0", "2.50e1", "25e-1", "1e400", "1e-99999999999999999999", "0.1e1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n json.Number
		if json.Unmarshal([]byte(s), &n) != nil || string(n) != s {
			return // not one JSON number
		}
		bumped, plain, ok := bump(s)
		if !ok {
			if strings.ContainsAny(s, ".eE") && len(s) <= 20 {
				if r, good := new(big.Rat).SetString(s); good && r.IsInt() {
					t.Fatalf("%s is an integer, not marked", s)
				}
			}
			return
		}
		if !strings.ContainsAny(s, ".eE") {
			t.Fatalf("plain %s marked", s)
		}
		if b, good := new(big.Rat).SetString(bumped); !good || b.IsInt() {
			t.Fatalf("%s bumped to %q, an integer", s, bumped)
		}
		if plain != "it in plain digits" {
			r, good := new(big.Rat).SetString(s)
			if !good || !r.IsInt() || r.Num().String() != plain {
				t.Fatalf("%s: plain %q", s, plain)
			}
		}
	})
}
