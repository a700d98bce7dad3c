package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// The decoders and encoders here read untrusted bytes (arguments from a
// model, bodies from providers) or must write what encoding/json and
// net/url write. Each fuzz target holds one of them to its standard
// library counterpart.

// seeds are inputs every target starts from.
var seeds = []string{
	`{}`, `null`, ` {"s":"x"} `, `[]`, `1`, `"s"`, `{"s":1}`, `{"s":"a","s":"b"}`, `{"S":"x"}`,
	`{"s":"\u00e9\ud83d\ude00\n\"\\\/"}`, `{"s":"\ud800"}`, "{\"s\":\"\xff\"}", `{"i":-0}`, `{"i":1.0}`,
	`{"i":9223372036854775807}`, `{"i":-9223372036854775808}`, `{"i":9223372036854775808}`,
	`{"u":18446744073709551615}`, `{"u":-1}`, `{"oi":null,"os":null,"ou":null,"ob":null}`,
	`{"b":true,"ob":false}`, `{"l":["a",null,"b"]}`, `{"l":[]}`, `{"l":null}`, `{"m":{"k":"v","n":null}}`,
	`{"m":{}}`, `{"n":{"s":"x","i":2}}`, `{"a":[{"s":"x"},{"i":3},null]}`, `{"x":[1,{"y":[true,false,null]}],"s":"z"}`,
	`{"s":"x",}`, `{"s" "x"}`, `{"s":"x"} {}`, `{"s":"x"}]`, `{"i":01}`, `{"i":1e3}`, `{"i":-}`, `{"x":1.e5}`,
	`{"x":tru}`, `{"x":"\q"}`, "{\"x\":\"\x01\"}", `{"x":"\u12"}`, `{"Ł":1}`, `{"ſ":"long s"}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	`{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	`{"f":1.5,"of":-2e-8}`, `{"f":1e400}`, `{"f":-0.0}`, `{"of":null,"f":null}`, `{"f":"1"}`, `{"f":123456789012345678901234567890}`,
	`{"r":{"a":[1,"x",{"b":null}]}}`, `{"r":null}`, `{"r": [ 1 , 2 ] }`, `{"r":"\ud800"}`, `{"r":{"k":1,"k":2}}`, "{\"r\":\"\xff\"}",
	`{"r":{"a":1,}}`, `{"r":"<&>"}`,
}

func addSeeds(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
}

func FuzzValid(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %t, encoding/json says %t", b, got, want)
		}
	})
}

// sample has one field of each kind the decoder reads.
type sample struct {
	S  string            `json:"s"`
	OS *string           `json:"os"`
	I  int64             `json:"i"`
	OI *int64            `json:"oi"`
	U  uint64            `json:"u"`
	OU *uint64           `json:"ou"`
	B  bool              `json:"b"`
	OB *bool             `json:"ob"`
	L  []string          `json:"l"`
	M  map[string]string `json:"m"`
	N  *inner            `json:"n"`
	A  []inner           `json:"a"`
	F  float64           `json:"f"`
	OF *float64          `json:"of"`
	R  json.RawMessage   `json:"r"`
}

type inner struct {
	S string `json:"s"`
	I int64  `json:"i"`
}

var sampleNames = []string{"s", "os", "i", "oi", "u", "ou", "b", "ob", "l", "m", "n", "a", "f", "of", "r"}

func (x *sample) member(name string, v *Value) error {
	switch name {
	case "s":
		return v.String(&x.S)
	case "os":
		return v.OptString(&x.OS)
	case "i":
		return v.Int64(&x.I)
	case "oi":
		return v.OptInt64(&x.OI)
	case "u":
		return v.Uint64(&x.U)
	case "ou":
		return v.OptUint64(&x.OU)
	case "b":
		return v.Bool(&x.B)
	case "ob":
		return v.OptBool(&x.OB)
	case "l":
		return v.Strings(&x.L)
	case "m":
		return v.StringMap(&x.M)
	case "f":
		return v.Float64(&x.F)
	case "of":
		return v.OptFloat64(&x.OF)
	case "r":
		return v.Raw((*[]byte)(&x.R))
	case "n":
		if v.Kind() == KindNull {
			x.N = nil
			return v.Skip()
		}
		if x.N == nil {
			x.N = new(inner)
		}
		return v.Object(x.N.member)
	case "a":
		if v.Kind() == KindNull {
			x.A = nil
			return v.Skip()
		}
		x.A = []inner{}
		return v.Array(func(e *Value) error {
			x.A = append(x.A, inner{})
			return e.Object(x.A[len(x.A)-1].member)
		})
	}
	return nil
}

func (x *inner) member(name string, v *Value) error {
	switch name {
	case "s":
		return v.String(&x.S)
	case "i":
		return v.Int64(&x.I)
	}
	return nil
}

// keyTrouble reports whether data (valid JSON) names a key twice in one
// object or names a key that encoding/json would match case-insensitively
// to a field without it being the field's exact name: documents on which
// this package differs from encoding/json by design.
func keyTrouble(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object, wantKey bool
		keys            map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			return true
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].wantKey = true
				}
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			for _, n := range sampleNames {
				if k != n && strings.EqualFold(k, n) {
					return true
				}
			}
			top.wantKey = false
			continue
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			stack = append(stack, &frame{object: true, wantKey: true, keys: map[string]bool{}})
			continue
		case '[':
			stack = append(stack, &frame{})
			continue
		case '}', ']':
			stack = stack[:len(stack)-1]
		}
		// A value ended: the enclosing object wants its next key.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
}

// badText reports whether data holds invalid UTF-8 or a surrogate escape,
// which strict decoding refuses (or, for a valid pair, which the check is
// too crude to tell apart).
func badText(data []byte) bool {
	if !utf8.Valid(data) {
		return true
	}
	lower := bytes.ToLower(data)
	for _, p := range []string{`\ud8`, `\ud9`, `\uda`, `\udb`, `\udc`, `\udd`, `\ude`, `\udf`} {
		if bytes.Contains(lower, []byte(p)) {
			return true
		}
	}
	return false
}

func FuzzDecodeObject(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want sample
		gotErr := DecodeObject(data, got.member)
		wantErr := json.Unmarshal(data, &want)
		if !json.Valid(data) {
			if gotErr == nil {
				t.Fatalf("DecodeObject accepted invalid JSON %q", data)
			}
			return
		}
		if keyTrouble(data) {
			return
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("DecodeObject(%q): %v; encoding/json: %v", data, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeObject(%q) = %+v; encoding/json = %+v", data, got, want)
		}
	})
}

// unmarshalStrict is what guest.DecodeArgs does.
func unmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

// strictMember reads sample's fields and nothing else (nested objects
// strictly too).
func (x *sample) strictMember(name string, v *Value) error {
	switch name {
	case "n":
		if v.Kind() == KindNull {
			x.N = nil
			return v.Skip()
		}
		if x.N == nil {
			x.N = new(inner)
		}
		return v.Object(x.N.strictMember)
	case "a":
		if v.Kind() == KindNull {
			x.A = nil
			return v.Skip()
		}
		x.A = []inner{}
		return v.Array(func(e *Value) error {
			x.A = append(x.A, inner{})
			return e.Object(x.A[len(x.A)-1].strictMember)
		})
	}
	return x.member(name, v)
}

func (x *inner) strictMember(name string, v *Value) error {
	switch name {
	case "s", "i":
		return x.member(name, v)
	}
	return nil
}

func FuzzDecodeObjectStrict(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"s":"x","zz":1}`))
	f.Add([]byte(`{"n":{"s":"x","zz":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want sample
		gotErr := DecodeObjectStrict(data, got.strictMember)
		wantErr := unmarshalStrict(data, &want)
		switch {
		case gotErr == nil && wantErr != nil:
			t.Fatalf("DecodeObjectStrict accepted %q, which encoding/json refuses: %v", data, wantErr)
		case gotErr == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("DecodeObjectStrict(%q) = %+v; encoding/json = %+v", data, got, want)
		case gotErr != nil && wantErr == nil && !keyTrouble(data) && !badText(data):
			t.Fatalf("DecodeObjectStrict refused %q, which encoding/json accepts: %v", data, gotErr)
		}
	})
}

// FuzzDecodeValueStrict: reading any value raw, DecodeValueStrict accepts
// what encoding/json accepts, keeps it as written, and refuses valid JSON
// only for a name twice in one object or ambiguous text, which its errors
// say, with an offset that points there.
func FuzzDecodeValueStrict(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`[{"a":1},{"a":2,"b":{"a":3,"a":4}}]`))
	f.Add([]byte(` "\udc00" `))
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw []byte
		err := DecodeValueStrict(data, func(v *Value) error { return v.Raw(&raw) })
		valid := json.Valid(data)
		if err == nil {
			if !valid {
				t.Fatalf("DecodeValueStrict accepted invalid JSON %q", data)
			}
			if !bytes.Equal(raw, bytes.Trim(data, " \t\r\n")) {
				t.Fatalf("%q read raw as %q", data, raw)
			}
			return
		}
		var de *DuplicateFieldError
		var se *SyntaxError
		switch {
		case errors.As(err, &de):
			if !errors.Is(err, ErrDuplicateField) || de.Offset >= len(data) || data[de.Offset] != '"' {
				t.Fatalf("%q: %v at offset %d", data, err, de.Offset)
			}
		case errors.As(err, &se):
			if se.Offset > len(data) {
				t.Fatalf("%q: %v: offset beyond the input", data, err)
			}
			if valid && !errors.Is(err, ErrAmbiguousText) {
				t.Fatalf("DecodeValueStrict refused valid JSON %q: %v", data, err)
			}
			if errors.Is(err, ErrAmbiguousText) && !badText(data) {
				t.Fatalf("%q: %v, but the text is not ambiguous", data, err)
			}
		default:
			t.Fatalf("%q: unexpected error %v", data, err)
		}
	})
}

// result is a result-shaped struct for the encoder's differential test.
type result struct {
	ID    string            `json:"id"`
	Desc  *string           `json:"description"`
	N     int64             `json:"amount"`
	U     uint64            `json:"size"`
	OK    bool              `json:"ok"`
	Tags  []string          `json:"tags"`
	Meta  map[string]string `json:"meta"`
	Inner struct {
		Email string `json:"Email"`
	} `json:"inner"`
	List []struct {
		Email string `json:"Email"`
	} `json:"list"`
	Nothing any             `json:"nothing"`
	F       float64         `json:"f"`
	Raw     json.RawMessage `json:"raw"`
	Floats  []float64       `json:"floats"`
}

func (r *result) append(b []byte) []byte {
	return AppendObject(b, func(o *Object) {
		o.String("id", r.ID)
		o.OptString("description", r.Desc)
		o.Int("amount", r.N)
		o.Uint("size", r.U)
		o.Bool("ok", r.OK)
		o.Strings("tags", r.Tags)
		o.StringMap("meta", r.Meta)
		o.Object("inner", func(o *Object) { o.String("Email", r.Inner.Email) })
		o.Array("list", func(a *Array) {
			for _, e := range r.List {
				a.Object(func(o *Object) { o.String("Email", e.Email) })
			}
		})
		o.Null("nothing")
		o.Float("f", r.F)
		o.Raw("raw", r.Raw)
		o.Array("floats", func(a *Array) {
			for _, f := range r.Floats {
				a.Float(f)
			}
		})
	})
}

func FuzzAppendObject(f *testing.F) {
	f.Add("pi_1", "a <b> & \"c\"\n\u2028", int64(-5), uint64(7), true, "k", "\xff\x01", 1.5, " {\"a\" : [1, \"<\u2028>\", null]} ")
	f.Add("", "", int64(0), uint64(0), false, "", "", 0.0, "")
	f.Add("x", "y", int64(1), uint64(2), false, "k", "v", 1e21, `"\u00e9\n"`)
	f.Add("x", "y", int64(1), uint64(2), false, "k", "v", 1e-7, `{"a":1,}`)
	f.Add("x", "y", int64(1), uint64(2), false, "k", "v", math.Inf(1), `1`)
	f.Add("x", "y", int64(1), uint64(2), false, "k", "v", 123456.789, "\"\xff\"")
	f.Fuzz(func(t *testing.T, s1, s2 string, n int64, u uint64, ok bool, k, v string, fl float64, raw string) {
		r := result{ID: s1, N: n, U: u, OK: ok, Tags: []string{s2, v}, Meta: map[string]string{k: v, s1: s2},
			F: fl, Raw: json.RawMessage(raw), Floats: []float64{fl, -fl / 3}}
		if raw == "" {
			r.Raw = nil // null; encoding/json refuses an empty, non-nil RawMessage
		}
		if len(r.Raw) > 0 && !json.Valid(r.Raw) || math.IsNaN(fl) || math.IsInf(fl, 0) {
			// encoding/json refuses to marshal it; the encoder panics
			// rather than write something else.
			if _, err := json.Marshal(r); err == nil {
				t.Fatalf("encoding/json marshalled %q / %v", raw, fl)
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatalf("AppendObject wrote raw %q / float %v", raw, fl)
					}
				}()
				r.append(nil)
			}()
			return
		}
		if ok {
			r.Desc = &s2
			r.Tags = nil
			r.Meta = nil
		}
		r.Inner.Email = v
		r.List = append(r.List, struct {
			Email string `json:"Email"`
		}{k})
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			// encoding/json writes an empty array for an empty,
			// non-nil slice.
			r.List = r.List[:0]
			w2, _ := json.Marshal(r)
			if got := r.append(nil); !bytes.Equal(got, w2) {
				t.Fatalf("empty list:\ngot  %s\nwant %s", got, w2)
			}
			r.List = r.List[:1]
		}
		if got := r.append([]byte("prefix")); !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("\ngot  %s\nwant %s", got, want)
		}
	})
}

func FuzzForm(f *testing.F) {
	f.Add("metadata[connhost_key]", "a b&c=d/é\x00+%")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, k, v string) {
		var form Form
		form.Add(k, v)
		form.Add("b"+k, v+k)
		want := url.QueryEscape(k) + "=" + url.QueryEscape(v) + "&" + url.QueryEscape("b"+k) + "=" + url.QueryEscape(v+k)
		if got := form.String(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		// In sorted key order, the bytes of url.Values.Encode.
		if k < "b"+k {
			vals := url.Values{k: {v}, "b" + k: {v + k}}
			if got := form.String(); got != vals.Encode() {
				t.Fatalf("got %q, url.Values.Encode %q", got, vals.Encode())
			}
		}
	})
}
