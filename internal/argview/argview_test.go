package argview

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/internal/strictjson"
)

var paymentSpec = Spec{
	Review: []string{"amount", "currency", "payment_method", "customer_email"},
	Money:  []Money{{Amount: "amount", Currency: "currency"}},
}

// lines renders fields the way every approval surface does.
func lines(t *testing.T, fields []Field) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, Write(&b, fields, "  "))
	return b.String()
}

// TestEscapedPaddingIsShownDecoded is the attack of the 2,000-byte dialog:
// amount last, behind description padding written as \u0041 escapes (six
// bytes of JSON for one character). Every argument is shown, decoded, and
// the amount first, whatever order the model wrote.
func TestEscapedPaddingIsShownDecoded(t *testing.T) {
	pad := strings.Repeat(`\u0041`, 990) // within the schema's maxLength of 1000
	args := `{"currency":"usd","payment_method":"pm_card_visa","description":"` + pad + `","amount":99999999}`
	fields, err := Render([]byte(args), paymentSpec)
	require.NoError(t, err)
	require.Equal(t, "amount", fields[0].Path)
	require.Equal(t, "99999999", fields[0].Value)
	require.Equal(t, "999,999.99 USD (99,999,999 minor units)", fields[0].Money)
	desc := fields[len(fields)-1]
	require.Equal(t, "description", desc.Path)
	require.Equal(t, `"`+strings.Repeat("A", 990)+`"`, desc.Value)
	out := lines(t, fields)
	require.NotContains(t, out, `\u0041`)
	require.Contains(t, out, "  amount = 99999999  (999,999.99 USD (99,999,999 minor units))\n")
	require.Less(t, strings.Index(out, "amount"), strings.Index(out, "description"))
}

func TestOrderIsReviewThenPath(t *testing.T) {
	a := `{"zeta":1,"customer_email":"a@example.com","beta":[3,2,1,0,9,8,7,6,5,4,10],"payment_method":"pm_x","amount":5,"currency":"usd","alpha":{"z":1,"a":2}}`
	b := `{"alpha":{"a":2,"z":1},"amount":5,"beta":[3,2,1,0,9,8,7,6,5,4,10],"currency":"usd","customer_email":"a@example.com","payment_method":"pm_x","zeta":1}`
	fa, err := Render([]byte(a), paymentSpec)
	require.NoError(t, err)
	fb, err := Render([]byte(b), paymentSpec)
	require.NoError(t, err)
	require.Equal(t, fa, fb, "the model's key order changes nothing")
	var paths []string
	for _, f := range fa {
		paths = append(paths, f.Path)
	}
	require.Equal(t, []string{"amount", "currency", "payment_method", "customer_email",
		"alpha.a", "alpha.z", "beta[0]", "beta[1]", "beta[2]", "beta[3]", "beta[4]", "beta[5]", "beta[6]", "beta[7]",
		"beta[8]", "beta[9]", "beta[10]", "zeta"}, paths)
	for i, f := range fa {
		require.Equal(t, i < 4, f.Review, f.Path)
	}
	require.Equal(t, "Decide on:\n  amount = 5  (0.05 USD (5 minor units))\n  currency = \"usd\"\n  payment_method = \"pm_x\"\n"+
		"  customer_email = \"a@example.com\"\nOther arguments:\n  alpha.a = 2\n", lines(t, fa)[:len("Decide on:\n  amount = 5  (0.05 USD (5 minor units))\n  currency = \"usd\"\n  payment_method = \"pm_x\"\n  customer_email = \"a@example.com\"\nOther arguments:\n  alpha.a = 2\n")])
}

func TestReviewFields(t *testing.T) {
	spec := Spec{Review: []string{"to", "cc", "shipping", "shipping.city"}}
	fields, err := Render([]byte(`{"text":"hi","to":["a@x","b@x"],"shipping":{"city":"Oslo","zip":"0150"}}`), spec)
	require.NoError(t, err)
	require.Equal(t, []Field{
		{Path: "to[0]", Value: `"a@x"`, Type: "string", Review: true},
		{Path: "to[1]", Value: `"b@x"`, Type: "string", Review: true},
		{Path: "cc", Value: "(not given)", Type: "absent", Review: true},
		{Path: "shipping.city", Value: `"Oslo"`, Type: "string", Review: true},
		{Path: "shipping.zip", Value: `"0150"`, Type: "string", Review: true},
		{Path: "text", Value: `"hi"`, Type: "string"},
	}, fields)
}

// TestUnboundedTextCannotHideTo: email.send's text had no maxLength; a long
// body put before "to" pushed the recipient past the dialog's cut. Now the
// recipient is a review field, first, whatever the body's size.
func TestUnboundedTextCannotHideTo(t *testing.T) {
	args := `{"subject":"invoice","text":"` + strings.Repeat("lorem ipsum ", 5000) + `","to":"attacker@evil.example"}`
	fields, err := Render([]byte(args), Spec{Review: []string{"to", "cc", "from", "subject"}})
	require.NoError(t, err)
	require.Equal(t, Field{Path: "to", Value: `"attacker@evil.example"`, Type: "string", Review: true}, fields[0])
	require.Contains(t, lines(t, fields), strings.Repeat("lorem ipsum ", 5000), "the body is shown whole, not cut")
}

func TestEscapes(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		escaped        bool
	}{
		{"plain", "pm_card_visa", `"pm_card_visa"`, false},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`, false},
		{"literal backslash-u is not an escape", `\u202E`, `"\\u202E"`, false},
		{"newline forging a line", "x\namount = 1", `"x\namount = 1"`, true},
		{"tab and CR", "a\tb\rc", `"a\tb\rc"`, true},
		{"NUL and DEL", "a\x00b\x7f", `"a\u0000b\u007F"`, true},
		{"terminal escape", "\x1b[2J", `"\u001B[2J"`, true},
		{"C1 control", "a\u0085b", `"a\u0085b"`, true},
		{"right-to-left override", "pay \u202etxt.exe", `"pay \u202Etxt.exe"`, true},
		{"isolates", "\u2066a\u2069", `"\u2066a\u2069"`, true},
		{"zero width space and joiner", "pm\u200b_\u200dx", `"pm\u200B_\u200Dx"`, true},
		{"byte order mark", "\ufeffx", `"\uFEFFx"`, true},
		{"no-break and ideographic space", "a\u00a0b\u3000c", `"a\u00A0b\u3000c"`, true},
		{"line and paragraph separator", "a\u2028b\u2029", `"a\u2028b\u2029"`, true},
		{"soft hyphen", "pay\u00admail", `"pay\u00ADmail"`, true},
		{"Hangul filler", "a\u3164b", `"a\u3164b"`, true},
		{"variation selector", "a\ufe0fb", `"a\uFE0Fb"`, true},
		{"tag characters", "a\U000E0041b", `"a\U000E0041b"`, true},
		{"private use", "a\ue000b", `"a\uE000b"`, true},
		{"combining mark first", "\u0301abc", `"\u0301abc"`, true},
		{"combining mark inside is text", "cafe\u0301", "\"cafe\u0301\"", false},
		{"letters of other scripts are text", "Grüße, 東京", `"Grüße, 東京"`, false},
		{"emoji", "ok 👍", `"ok 👍"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, escaped := Quote(tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.escaped, escaped)
			back, err := unquote(got)
			require.NoError(t, err)
			require.Equal(t, tc.in, back)
		})
	}
}

func TestPaths(t *testing.T) {
	fields, err := Render([]byte(`{"a.b":1,"x y":2,"\u202e":3,"":4,"9":5,"ok-name_1":{"":{}},"list":[[],{}],"n":null,"t":true}`), Spec{})
	require.NoError(t, err)
	got := map[string]string{}
	var order []string
	for _, f := range fields {
		got[f.Path] = f.Value
		order = append(order, f.Path)
	}
	require.Equal(t, []string{`[""]`, `["9"]`, `["a.b"]`, "list[0]", "list[1]", "n", `ok-name_1[""]`, "t", `["x y"]`, `["\u202E"]`}, order)
	require.Equal(t, "[]", got["list[0]"])
	require.Equal(t, "{}", got["list[1]"])
	require.Equal(t, "null", got["n"])
	require.Equal(t, "true", got["t"])
	require.Equal(t, "{}", got[`ok-name_1[""]`])
}

func TestMoney(t *testing.T) {
	for _, tc := range []struct {
		args string
		m    Money
		want string
	}{
		{`{"amount":500,"currency":"usd"}`, Money{"amount", "currency"}, "5.00 USD (500 minor units)"},
		{`{"amount":5,"currency":"EUR"}`, Money{"amount", "currency"}, "0.05 EUR (5 minor units)"},
		{`{"amount":99999999,"currency":"usd"}`, Money{"amount", "currency"}, "999,999.99 USD (99,999,999 minor units)"},
		{`{"amount":99999999,"currency":"jpy"}`, Money{"amount", "currency"}, "99,999,999 JPY (99,999,999 minor units)"},
		{`{"amount":1234567,"currency":"kwd"}`, Money{"amount", "currency"}, "1,234.567 KWD (1,234,567 minor units)"},
		{`{"amount":-250,"currency":"usd"}`, Money{"amount", "currency"}, "-2.50 USD (-250 minor units)"},
		{`{"amount":1e2,"currency":"usd"}`, Money{"amount", "currency"}, "1.00 USD (100 minor units)"},
		{`{"amount":1e99999999,"currency":"usd"}`, Money{"amount", "currency"}, "not an integer amount of minor units: it cannot be shown in its currency"},
		{`{"amount":2.5,"currency":"usd"}`, Money{"amount", "currency"}, "not an integer amount of minor units: it cannot be shown in its currency"},
		{`{"amount":500}`, Money{"amount", "currency"}, "500 minor units (no currency given)"},
		{`{"amount":500,"currency":"u$d"}`, Money{"amount", "currency"}, "500 minor units (the currency given is not a three-letter ISO 4217 code)"},
		{`{"amount":500,"payment_intent":"pi_1"}`, Money{"amount", ""}, "500 minor units (the arguments do not name the currency)"},
		{`{"p":{"amount":1000000,"cur":"gbp"}}`, Money{"p.amount", "p.cur"}, "10,000.00 GBP (1,000,000 minor units)"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			fields, err := Render([]byte(tc.args), Spec{Money: []Money{tc.m}})
			require.NoError(t, err)
			var got string
			for _, f := range fields {
				if f.Money != "" {
					got = f.Money
				}
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRenderRefusesWhatTheHostRefuses(t *testing.T) {
	for _, in := range []string{`{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `[1]`, `{"a":"\udc80"}`, `{} {}`, ``} {
		_, err := Render([]byte(in), Spec{})
		require.ErrorIs(t, err, ErrArguments, in)
	}
}

// unquote reads back a Value written by Quote.
func unquote(q string) (string, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", fmt.Errorf("not quoted: %s", q)
	}
	s := q[1 : len(q)-1]
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			return "", fmt.Errorf("bare quote at %d", i)
		case c != '\\':
			r, size := utf8.DecodeRuneInString(s[i:])
			if mustEscape(r, i == 0) {
				return "", fmt.Errorf("raw %U at %d", r, i)
			}
			b.WriteRune(r)
			i += size
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("dangling backslash")
		}
		switch s[i+1] {
		case '"', '\\':
			b.WriteByte(s[i+1])
			i += 2
		case 'n':
			b.WriteByte('\n')
			i += 2
		case 'r':
			b.WriteByte('\r')
			i += 2
		case 't':
			b.WriteByte('\t')
			i += 2
		case 'u', 'U':
			n := 4
			if s[i+1] == 'U' {
				n = 8
			}
			if i+2+n > len(s) {
				return "", fmt.Errorf("short escape")
			}
			v, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32)
			if err != nil {
				return "", err
			}
			b.WriteRune(rune(v))
			i += 2 + n
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i+1])
		}
	}
	return b.String(), nil
}

// leaves counts the leaves of a decoded document as Render flattens it.
func leaves(v any, top bool) int {
	switch v := v.(type) {
	case map[string]any:
		n := 0
		if len(v) == 0 && !top {
			n = 1
		}
		for _, e := range v {
			n += leaves(e, false)
		}
		return n
	case []any:
		if len(v) == 0 {
			return 1
		}
		n := 0
		for _, e := range v {
			n += leaves(e, false)
		}
		return n
	}
	return 1
}

// FuzzRender holds the renderer to what a reviewer relies on, for any
// bytes a model can send: it never panics; whatever the host accepts it
// renders; every leaf appears exactly once; no field's path or value holds
// a character that must be escaped; and every string value reads back as
// exactly the argument.
func FuzzRender(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`,
		`{"description":"` + strings.Repeat(`\u0041`, 50) + `","amount":99999999,"currency":"usd"}`,
		`{"to":["a@x","b@x"],"text":"a\nb\u202e\u0000","cc":[]}`,
		`{"a.b":{"":[{},[],null,true,1e5]}, "\u2066":"\ufeff"}`,
		`{"amount":1e99999,"currency":"jpy"}`, `{"amount":-0.0,"currency":"xyz"}`,
		`{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"x":"\ud83d\ude00\u0301"}`,
	} {
		f.Add([]byte(seed))
	}
	spec := Spec{Review: []string{"amount", "to", "nope"}, Money: []Money{{Amount: "amount", Currency: "currency"}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		fields, err := Render(b, spec)
		doc, perr := strictjson.ParseObject(b)
		if perr != nil {
			if err == nil {
				t.Fatalf("rendered arguments the host refuses: %v", perr)
			}
			return
		}
		if err != nil {
			t.Fatalf("refused arguments the host accepts: %v", err)
		}
		absent := 0
		seen := map[string]bool{}
		for _, fl := range fields {
			if fl.Type == "absent" {
				absent++
				continue
			}
			if seen[fl.Path] {
				t.Fatalf("path %s shown twice", fl.Path)
			}
			seen[fl.Path] = true
			for _, s := range []string{fl.Path, fl.Value, fl.Money} {
				for i, r := range s {
					if r == utf8.RuneError || (mustEscape(r, false) && r != ' ') {
						t.Fatalf("field %q shows %U raw at %d", fl.Path, r, i)
					}
				}
			}
			if fl.Type == "string" {
				if _, err := unquote(fl.Value); err != nil {
					t.Fatalf("value of %s does not read back: %v (%s)", fl.Path, err, fl.Value)
				}
			}
		}
		if want := leaves(doc, true); len(fields)-absent != want {
			t.Fatalf("%d fields shown, the arguments have %d leaves", len(fields)-absent, want)
		}
		// Every top-level string reads back as itself.
		for k, v := range doc {
			s, ok := v.(string)
			if !ok {
				continue
			}
			p := formatPath([]seg{{key: k, index: -1}})
			for _, fl := range fields {
				if fl.Path == p {
					back, err := unquote(fl.Value)
					if err != nil || back != s {
						js, _ := json.Marshal(s)
						t.Fatalf("%s: shown %s, reads back %q, was %s", p, fl.Value, back, js)
					}
				}
			}
		}
	})
}

// TestAmount: the amount in major units of the first money field given
// with its currency; none when the currency is missing or invalid, or the
// amount is not an integer.
func TestAmount(t *testing.T) {
	spec := Spec{Money: []Money{{Amount: "amount", Currency: "currency"}}}
	for _, tc := range []struct {
		name, args string
		spec       Spec
		want, code string
	}{
		{"two decimals", `{"amount":1999,"currency":"usd"}`, spec, "1999/100", "USD"},
		{"zero decimals", `{"amount":500,"currency":"JPY"}`, spec, "500", "JPY"},
		{"three decimals", `{"amount":1500,"currency":"kwd"}`, spec, "3/2", "KWD"},
		{"nested", `{"p":{"a":250,"c":"eur"}}`, Spec{Money: []Money{{Amount: "p.a", Currency: "p.c"}}}, "5/2", "EUR"},
		{"first given wins", `{"b":7,"c":"usd"}`, Spec{Money: []Money{{Amount: "a", Currency: "c"}, {Amount: "b", Currency: "c"}}}, "7/100", "USD"},
		{"no currency", `{"amount":1999}`, spec, "", ""},
		{"bad currency", `{"amount":1999,"currency":"dollars"}`, spec, "", ""},
		{"not an integer", `{"amount":19.5,"currency":"usd"}`, spec, "", ""},
		{"no money declared", `{"amount":1999,"currency":"usd"}`, Spec{}, "", ""},
		{"currency path undeclared", `{"amount":1999,"currency":"usd"}`, Spec{Money: []Money{{Amount: "amount"}}}, "", ""},
		{"not an object", `[1]`, spec, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, code, ok := Amount([]byte(tc.args), tc.spec)
			if tc.want == "" {
				if ok {
					t.Fatalf("Amount = %v %s, want none", got, code)
				}
				return
			}
			if !ok || got.RatString() != tc.want || code != tc.code {
				t.Fatalf("Amount = %v %q %v, want %s %s", got, code, ok, tc.want, tc.code)
			}
		})
	}
}
