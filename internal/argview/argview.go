// Package argview renders a tool call's arguments for the human who
// approves it: every argument, decoded, one per line, in an order the model
// cannot choose, with the characters that would change how the line reads
// made visible.
//
// The arguments are untrusted: the model wrote them, and a model can be
// steered by whatever it read. So nothing is cut (a dialog that shows the
// first 2,000 bytes approves the rest unseen), JSON escapes are decoded
// (\u0041 padding is shown as the text it is, and counted as such), and
// control, bidirectional and invisible characters are shown as escapes
// (\u202E), never passed through. Nested objects and arrays are flattened
// to one line per leaf with its path ("shipping.city", "to[1]"). The
// fields an operation's manifest names for review come first, in its
// order, then every other field in path order; money amounts in minor
// units are shown in major units with their currency as well.
//
// The host builds its approval view (host.ApprovalView) from [Render];
// the MCP dialog, the CLI and the HTTP API all show that view.
package argview

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/connhost/connhost/internal/strictjson"
)

// Spec says how to show one operation's arguments; the manifest's
// review and money keys (manifests.Operation.Review and .Money).
type Spec struct {
	// Review lists the paths a reviewer decides on, in the order they are
	// shown first. A path names a property, nested properties joined by
	// "." ("shipping.city"); a path naming an object or array covers every
	// field under it.
	Review []string
	// Money lists the money amounts among the arguments.
	Money []Money
}

// Money is one money amount: the path of an integer amount in the
// currency's minor unit, and the path of its ISO 4217 currency code (""
// when the arguments do not name it).
type Money struct {
	Amount   string
	Currency string
}

// Field is one argument as a reviewer is shown it: a leaf of the
// arguments (a string, number, boolean or null, or an empty object or
// array), or a review field the call does not give.
type Field struct {
	// Path locates the field: property names joined by "." and array
	// indexes in brackets ("to[0]", "shipping.city"); a name that is not
	// a plain identifier is quoted in brackets (`meta["a.b"]`).
	Path string `json:"path"`
	// Value is the field as shown: a string in double quotes with `\"`,
	// `\\` and every character listed under Escaped written as an escape;
	// a number as the call wrote it; true, false, null, {} or [].
	Value string `json:"value"`
	// Type is the JSON type: "string", "number", "boolean", "null",
	// "object" or "array" (empty ones: others are flattened), or "absent"
	// for a review field the call does not give.
	Type string `json:"type"`
	// Review marks the fields the manifest names for review.
	Review bool `json:"review,omitempty"`
	// Money is the amount in major units with its currency, for a money
	// amount ("999,999.99 USD (99,999,999 minor units)"), or why it
	// cannot be shown so.
	Money string `json:"money,omitempty"`
	// Escaped is set when Value shows characters as escapes: control
	// characters (\n, \t, \u0000 …), bidirectional and other formatting
	// characters (\u202E, \u200B …), white space other than the space,
	// private use and unassigned code points, and characters that look
	// like nothing (U+3164, variation selectors, a combining mark right
	// after the opening quote).
	Escaped bool `json:"escaped,omitempty"`
}

// ErrArguments is returned (wrapped) by Render for arguments that are not
// one strict JSON object.
var ErrArguments = errors.New("argview: arguments are not one JSON object")

// Render decodes args, which must be one JSON object under the host's
// strict rules (valid UTF-8, no key named twice: internal/strictjson), and
// returns every field in review order: spec.Review's paths first, in that
// order (one with no value is an "absent" field), then every other field
// in path order (property names bytewise, indexes numerically).
func Render(args []byte, spec Spec) ([]Field, error) {
	doc, err := strictjson.ParseObject(args)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrArguments, err)
	}
	var leaves []leaf
	flatten(doc, nil, &leaves)
	slices.SortFunc(leaves, func(a, b leaf) int { return comparePath(a.path, b.path) })

	out := make([]Field, 0, len(leaves)+len(spec.Review))
	taken := make([]bool, len(leaves))
	for _, rp := range spec.Review {
		want := strings.Split(rp, ".")
		found := false
		for i, l := range leaves {
			if !taken[i] && underPath(l.path, want) {
				taken[i], found = true, true
				f := l.field()
				f.Review = true
				out = append(out, f)
			}
		}
		if !found && !coveredBefore(out, want) {
			out = append(out, Field{Path: formatPath(keysOf(want)), Value: "(not given)", Type: "absent", Review: true})
		}
	}
	for i, l := range leaves {
		if !taken[i] {
			out = append(out, l.field())
		}
	}
	for _, m := range spec.Money {
		p := formatPath(keysOf(strings.Split(m.Amount, ".")))
		i := slices.IndexFunc(out, func(f Field) bool { return f.Path == p })
		if i < 0 || out[i].Type == "absent" {
			continue
		}
		out[i].Money = money(doc, m)
	}
	return out, nil
}

// coveredBefore reports whether an earlier review path already took the
// fields of want (a review list naming "shipping" and "shipping.city").
func coveredBefore(out []Field, want []string) bool {
	p := formatPath(keysOf(want))
	for _, f := range out {
		if f.Path == p || strings.HasPrefix(f.Path, p+".") || strings.HasPrefix(f.Path, p+"[") {
			return true
		}
	}
	return false
}

// seg is one step of a path: a property name or an array index.
type seg struct {
	key   string
	index int // -1 for a property
}

func keysOf(names []string) []seg {
	out := make([]seg, len(names))
	for i, n := range names {
		out[i] = seg{key: n, index: -1}
	}
	return out
}

type leaf struct {
	path  []seg
	value any
}

func (l leaf) field() Field {
	f := Field{Path: formatPath(l.path)}
	switch v := l.value.(type) {
	case string:
		f.Type = "string"
		f.Value, f.Escaped = Quote(v)
	case interface{ String() string }: // json.Number
		f.Type, f.Value = "number", v.String()
	case bool:
		f.Type, f.Value = "boolean", strconv.FormatBool(v)
	case nil:
		f.Type, f.Value = "null", "null"
	case map[string]any:
		f.Type, f.Value = "object", "{}"
	case []any:
		f.Type, f.Value = "array", "[]"
	}
	return f
}

// flatten appends every leaf of v under path to out. Empty objects and
// arrays are leaves of their own, so that nothing given goes unshown.
func flatten(v any, path []seg, out *[]leaf) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 && len(path) > 0 {
			*out = append(*out, leaf{path: slices.Clone(path), value: v})
		}
		for k, e := range v {
			flatten(e, append(path, seg{key: k, index: -1}), out)
		}
	case []any:
		if len(v) == 0 {
			*out = append(*out, leaf{path: slices.Clone(path), value: v})
		}
		for i, e := range v {
			flatten(e, append(path, seg{index: i}), out)
		}
	default:
		*out = append(*out, leaf{path: slices.Clone(path), value: v})
	}
}

// comparePath orders paths segment by segment: names bytewise, indexes
// numerically, and a name before an index.
func comparePath(a, b []seg) int {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		switch {
		case x.index < 0 && y.index < 0:
			if c := strings.Compare(x.key, y.key); c != 0 {
				return c
			}
		case x.index >= 0 && y.index >= 0:
			if c := cmp.Compare(x.index, y.index); c != 0 {
				return c
			}
		case x.index < 0:
			return -1
		default:
			return 1
		}
	}
	return cmp.Compare(len(a), len(b))
}

// underPath reports whether p is want, or inside it (array indexes below
// want's last name included).
func underPath(p []seg, want []string) bool {
	if len(p) < len(want) {
		return false
	}
	for i, w := range want {
		if p[i].index >= 0 || p[i].key != w {
			return false
		}
	}
	return true
}

// formatPath writes a path as Field.Path describes.
func formatPath(p []seg) string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.index >= 0:
			fmt.Fprintf(&b, "[%d]", s.index)
		case plainName(s.key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		default:
			q, _ := Quote(s.key)
			b.WriteString("[" + q + "]")
		}
	}
	return b.String()
}

// plainName reports whether a property name can be written bare in a
// path: ASCII letters, digits, '_' and '-', not starting with a digit or
// '-'.
func plainName(k string) bool {
	if k == "" || k[0] == '-' || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Quote returns s in double quotes with `"` and `\` escaped and every
// character that must not reach a reviewer's screen as itself written as
// an escape (see Field.Escaped): \n, \r and \t by name, others as \uXXXX
// (\UXXXXXXXX beyond the Basic Multilingual Plane). escaped reports
// whether it wrote any of the latter. Every escape starts with a
// backslash, and a backslash in s is written as `\\`, so the result reads
// back as exactly s.
func Quote(s string) (quoted string, escaped bool) {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
			escaped = true
		case r == '\r':
			b.WriteString(`\r`)
			escaped = true
		case r == '\t':
			b.WriteString(`\t`)
			escaped = true
		case r == utf8.RuneError && !validAt(s, i):
			b.WriteString(`\uFFFD`)
			escaped = true
		case mustEscape(r, i == 0):
			if r > 0xFFFF {
				fmt.Fprintf(&b, `\U%08X`, r)
			} else {
				fmt.Fprintf(&b, `\u%04X`, r)
			}
			escaped = true
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), escaped
}

// validAt reports whether the rune at s[i:] is a real U+FFFD, not an
// invalid byte (Render refuses invalid UTF-8; Quote is exported).
func validAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 3
}

// invisible are characters unicode.IsPrint accepts that draw nothing, or
// nothing a reviewer would notice.
var invisible = []*unicode.RangeTable{
	{R16: []unicode.Range16{
		{Lo: 0x034F, Hi: 0x034F, Stride: 1}, // combining grapheme joiner
		{Lo: 0x115F, Hi: 0x1160, Stride: 1}, // Hangul fillers
		{Lo: 0x17B4, Hi: 0x17B5, Stride: 1}, // Khmer inherent vowels
		{Lo: 0x180B, Hi: 0x180F, Stride: 1}, // Mongolian variation selectors
		{Lo: 0x2800, Hi: 0x2800, Stride: 1}, // braille blank
		{Lo: 0x3164, Hi: 0x3164, Stride: 1}, // Hangul filler
		{Lo: 0xFE00, Hi: 0xFE0F, Stride: 1}, // variation selectors
		{Lo: 0xFFA0, Hi: 0xFFA0, Stride: 1}, // halfwidth Hangul filler
	}, R32: []unicode.Range32{
		{Lo: 0x1D173, Hi: 0x1D17A, Stride: 1}, // musical formatting
		{Lo: 0xE0100, Hi: 0xE01EF, Stride: 1}, // variation selectors supplement
	}},
}

// mustEscape reports whether r is shown as an escape: not printable (Go's
// unicode.IsPrint: control and format characters such as the bidi
// overrides, white space other than U+0020, private use, surrogates,
// unassigned), invisible though printable, or a combining mark at the
// start of a string, where it would fuse with the opening quote.
func mustEscape(r rune, first bool) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7F
	}
	if !unicode.IsPrint(r) || unicode.In(r, invisible...) {
		return true
	}
	return first && unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc)
}

// money formats the amount at m.Amount of doc with its currency.
func money(doc map[string]any, m Money) string {
	v, _ := lookup(doc, m.Amount)
	n, ok := integer(v)
	if !ok {
		return "not an integer amount of minor units: it cannot be shown in its currency"
	}
	minor := group(n.String()) + " minor units"
	if m.Currency == "" {
		return minor + " (the arguments do not name the currency)"
	}
	cv, given := lookup(doc, m.Currency)
	code, isStr := cv.(string)
	switch {
	case !given:
		return minor + " (no currency given)"
	case !isStr || !currencyRE(code):
		return minor + " (the currency given is not a three-letter ISO 4217 code)"
	}
	code = strings.ToUpper(code)
	return fmt.Sprintf("%s %s (%s)", majorUnits(n, exponent(code)), code, minor)
}

// lookup returns the value at a dotted property path of doc.
func lookup(doc map[string]any, path string) (any, bool) {
	var v any = doc
	for _, name := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// integer returns v as an integer if it is a JSON number with an integer
// value (1e2 included). Numbers longer than 64 bytes or with an exponent
// beyond ±40 are not amounts: no number makes the view costly.
func integer(v any) (*big.Int, bool) {
	num, ok := v.(interface{ String() string })
	if !ok {
		return nil, false
	}
	s := num.String()
	if len(s) > 64 {
		return nil, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > 40 || e < -40 {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return nil, false
	}
	return r.Num(), true
}

func currencyRE(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// exponent is the number of decimals of a currency's minor unit, as
// Stripe's API counts them (https://docs.stripe.com/currencies): zero for
// its zero-decimal currencies, three for its three-decimal ones, two for
// every other code.
func exponent(code string) int {
	switch code {
	case "BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF":
		return 0
	case "BHD", "JOD", "KWD", "OMR", "TND":
		return 3
	}
	return 2
}

// majorUnits writes n minor units with exp decimals, grouped by thousands.
func majorUnits(n *big.Int, exp int) string {
	s := new(big.Int).Abs(n).String()
	if exp > 0 {
		if len(s) <= exp {
			s = strings.Repeat("0", exp-len(s)+1) + s
		}
		s = group(s[:len(s)-exp]) + "." + s[len(s)-exp:]
	} else {
		s = group(s)
	}
	if n.Sign() < 0 {
		s = "-" + s
	}
	return s
}

// group inserts a comma between every three digits of a decimal integer.
func group(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}

// Write writes fields one per line, each prefixed by indent: the review
// fields under "Decide on:", the others under "Other arguments:" (just
// "Arguments:" when the manifest names none).
func Write(w io.Writer, fields []Field, indent string) error {
	var b strings.Builder
	review := slices.ContainsFunc(fields, func(f Field) bool { return f.Review })
	section := ""
	for _, f := range fields {
		want := "Arguments:"
		switch {
		case f.Review:
			want = "Decide on:"
		case review:
			want = "Other arguments:"
		}
		if want != section {
			section = want
			b.WriteString(want + "\n")
		}
		fmt.Fprintf(&b, "%s%s = %s", indent, f.Path, f.Value)
		if f.Money != "" {
			fmt.Fprintf(&b, "  (%s)", f.Money)
		}
		b.WriteByte('\n')
	}
	if len(fields) == 0 {
		b.WriteString("Arguments: none\n")
	}
	if slices.ContainsFunc(fields, func(f Field) bool { return f.Escaped }) {
		b.WriteString("(\\n, \\t, \\uXXXX: control, invisible or direction-changing characters in the arguments, shown as escapes)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Amount returns the first of spec.Money's amounts that args give with
// their currency: the amount in the currency's major units (as the view's
// Money shows it) and the upper-case ISO 4217 code. ok is false when args
// are no JSON object, or give no such amount (none declared, not an
// integer, no valid currency): an amount is only compared in the currency
// the call names.
func Amount(args []byte, spec Spec) (major *big.Rat, currency string, ok bool) {
	if len(spec.Money) == 0 {
		return nil, "", false
	}
	doc, err := strictjson.ParseObject(args)
	if err != nil {
		return nil, "", false
	}
	for _, m := range spec.Money {
		if m.Currency == "" {
			continue
		}
		v, given := lookup(doc, m.Amount)
		if !given {
			continue
		}
		n, isInt := integer(v)
		cv, _ := lookup(doc, m.Currency)
		code, isStr := cv.(string)
		if !isInt || !isStr || !currencyRE(code) {
			continue
		}
		code = strings.ToUpper(code)
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exponent(code))), nil)
		return new(big.Rat).SetFrac(n, scale), code, true
	}
	return nil, "", false
}
