package manifests

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLinesOfKeys: findings name the line of the offending key, of an
// entry in a multi-line array, and of a key inside an input schema.
func TestLinesOfKeys(t *testing.T) {
	m, err := Load("testdata/valid.toml")
	require.NoError(t, err)
	require.Equal(t, 7, m.Line("connector.sha256"))
	require.Equal(t, 6, m.Line("connector.module"))
	require.Equal(t, 10, m.Line("capabilities.http"))
	require.Equal(t, 11, m.ValueLine("capabilities.http", "https://api.stripe.com:443"))
	require.Equal(t, 12, m.ValueLine("capabilities.http", "http://127.0.0.1:8080"))
	require.Equal(t, 10, m.ValueLine("capabilities.http", "https://nowhere.example:443"), "unknown value: the key's line")
	require.Equal(t, 17, m.Line("limits"), "an absent key: its table's line")
	require.Equal(t, 0, m.Line("nope.key"))
	require.Equal(t, 55, m.Line("provider.idempotency_header"))

	op, _ := m.Operation("create_payment")
	require.Equal(t, 28, op.KeyLine("effect"))
	require.Equal(t, 29, op.KeyLine("recovery"))
	require.Equal(t, 32, op.KeyLine("max_attempts"))
	require.Equal(t, 25, op.KeyLine("reconcile_settle"), "not declared: the [[operation]] header")
	require.Equal(t, Pos{Line: 33}, op.SchemaPos("/nope"), "unknown pointer: the input_schema line")
	require.Equal(t, Pos{Line: 34, Col: 1}, op.SchemaPos(""))
	require.Equal(t, Pos{Line: 37, Col: 5}, op.SchemaPos("/properties/amount"))
	require.Equal(t, Pos{Line: 37, Col: 18}, op.SchemaPos("/properties/amount/type"))
	require.Equal(t, Pos{Line: 38, Col: 45}, op.SchemaPos("/properties/currency/enum/0"))

	read, _ := m.Operation("get_payment")
	require.Equal(t, Pos{Line: 50, Col: 51}, read.SchemaPos("/properties/id"), "a one-line literal string")
	require.True(t, strings.HasPrefix(string(m.Text()), "# A complete manifest"))

	var byHand Operation
	require.Equal(t, 0, byHand.KeyLine("recovery"))
	require.Equal(t, Pos{}, byHand.SchemaPos("/properties"))
	require.Equal(t, 0, (&Manifest{}).Line("connector.name"))
}

// TestStringPositionsDecodeEscapes: an offset in the decoded text of a
// basic string lands on the right column after escapes and line
// continuations.
func TestStringPositionsDecodeEscapes(t *testing.T) {
	lines := []string{
		`s = "a\"b\u00e9c"`,
		`m = """`,
		`x\`,
		`   y\ty"""`,
	}
	one, ok := locateString(lines, 1, 3)
	require.True(t, ok)
	decoded := "a\"b\u00e9c"
	for off, want := range map[int]Pos{
		0:                                {1, 6},  // a
		1:                                {1, 7},  // \"
		2:                                {1, 9},  // b
		3:                                {1, 10}, // \u00e9 (two bytes decoded)
		strings.Index(decoded, "c"):      {1, 16},
		strings.Index(decoded, "c") + 50: {1, 18}, // clamped
	} {
		require.Equal(t, want, one.pos(off), "offset %d", off)
	}
	multi, ok := locateString(lines, 2, 3)
	require.True(t, ok)
	// The content starts on the next line; "x" then a continuation that
	// swallows the newline and the indentation: decoded "xy\ty".
	require.Equal(t, Pos{3, 1}, multi.pos(0))
	require.Equal(t, Pos{4, 4}, multi.pos(1))
	require.Equal(t, Pos{4, 7}, multi.pos(3))

	_, ok = locateString(lines, 1, 99)
	require.False(t, ok)
	_, ok = locateString([]string{"n = 1"}, 1, 3)
	require.False(t, ok, "not a string")
}

func TestJSONPointerOffsets(t *testing.T) {
	text := ` {"a": {"b~/c": [1, {"d": 2}]}, "e": []}`
	got := jsonPointerOffsets(text)
	want := map[string]int{
		"":              1,
		"/a":            2,
		"/a/b~0~1c":     8,
		"/a/b~0~1c/0":   17,
		"/a/b~0~1c/1":   20,
		"/a/b~0~1c/1/d": 21,
		"/e":            32,
	}
	require.Equal(t, want, got)
	for ptr, off := range got {
		require.True(t, off >= 0 && off <= len(text), ptr)
	}
	require.Equal(t, -1, jsonSyntaxOffset(`{"a": 1}`))
	require.Equal(t, 8, jsonSyntaxOffset(`{"a": 1,}`))
	require.Equal(t, 9, jsonSyntaxOffset(`{"a": 1} x`))
	require.Equal(t, 7, jsonSyntaxOffset(`{"a": 1`))
}

// FuzzSchemaPositions: the position decoders never panic on any schema
// text and stay inside it.
func FuzzSchemaPositions(f *testing.F) {
	for _, s := range []string{`{"a": [1, {"b": null}]}`, `{"a": "\u00e9\"}`, `[`, `{"a":1,}`, `{} x`, ""} {
		f.Add(s)
	}
	data, err := os.ReadFile("testdata/valid.toml")
	require.NoError(f, err)
	f.Add(string(data))
	f.Fuzz(func(t *testing.T, text string) {
		for ptr, off := range jsonPointerOffsets(text) {
			if off < 0 || off > len(text) {
				t.Fatalf("pointer %q at %d outside %d bytes", ptr, off, len(text))
			}
		}
		if off := jsonSyntaxOffset(text); off < -1 || off > len(text) {
			t.Fatalf("syntax offset %d outside %d bytes", off, len(text))
		}
		lines := strings.Split("v = \"\"\"\n"+text+"\"\"\"", "\n")
		if loc, ok := locateString(lines, 1, 3); ok {
			for off := 0; off <= len(text)+1; off += 1 + len(text)/16 {
				p := loc.pos(off)
				if p.Line < 1 || p.Line > len(lines) || p.Col < 1 {
					t.Fatalf("offset %d at %+v outside the text", off, p)
				}
			}
		}
	})
}
