package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDecodeObjectStrictRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		is       error  // errors.Is target, or nil
		msg      string // substring of the message
	}{
		{"unknown field", `{"s":"x","idempotency_key":"k"}`, ErrUnknownField, `codec: idempotency_key: unknown field`},
		{"case-folded name is unknown", `{"S":"x"}`, ErrUnknownField, `S: unknown field`},
		{"duplicate", `{"s":"x","i":1,"s":"y"}`, ErrDuplicateField, `s: duplicate field`},
		{"nested unknown", `{"n":{"s":"x","q":1}}`, ErrUnknownField, `codec: n.q: unknown field`},
		{"type in array", `{"a":[{"s":"x"},{"i":"7"}]}`, ErrType, `codec: a[1].i: wrong type: want an int64, got a string`},
		{"fraction", `{"i":1.5}`, ErrType, `i: wrong type: want an int64, got the number 1.5`},
		{"overflow", `{"i":9223372036854775808}`, ErrType, `want an int64, got the number 9223372036854775808`},
		{"negative uint", `{"u":-1}`, ErrType, `want a uint64`},
		{"invalid UTF-8", "{\"s\":\"a\xffb\"}", nil, `ambiguous text: invalid UTF-8 at offset 7`},
		{"lone surrogate", `{"s":"\udc00"}`, nil, `ambiguous text: unpaired UTF-16 surrogate escape at offset 6`},
		{"invalid UTF-8 in a name", "{\"\xff\":1}", nil, `invalid UTF-8`},
		{"trailing data", `{"s":"x"} {}`, nil, `trailing data after the JSON value at offset 10`},
		{"not an object", `["s"]`, ErrType, `want an object, got an array`},
		{"syntax", `{"s":"x",}`, nil, `want a string key at offset 9`},
		{"truncated", `{"s":"x`, nil, `unexpected end of input in a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var x sample
			err := DecodeObjectStrict([]byte(tc.in), x.strictMember)
			if err == nil {
				t.Fatalf("accepted %q", tc.in)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not contain %q", err, tc.msg)
			}
		})
	}
}

// TestDecodeObjectLenient: what provider responses need, read as
// encoding/json reads it.
func TestDecodeObjectLenient(t *testing.T) {
	in := `{"id":"pi_1","object":"payment_intent","amount":2000,"charges":{"data":[{"x":[1,2,{"y":null}]}]},` +
		`"description":null,"metadata":{"k":"v"},"s":"a\ud800b\u00e9","extra":"\u0041","id":"pi_2"}`
	var got struct {
		ID, S  string
		Amount int64
		Desc   *string
		Meta   map[string]string
	}
	got.Desc = new(string)
	err := DecodeObject([]byte(in), func(name string, v *Value) error {
		switch name {
		case "id":
			return v.String(&got.ID)
		case "s":
			return v.String(&got.S)
		case "amount":
			return v.Int64(&got.Amount)
		case "description":
			return v.OptString(&got.Desc)
		case "metadata":
			return v.StringMap(&got.Meta)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "pi_2" || got.S != "a\uFFFDb\u00e9" || got.Amount != 2000 || got.Desc != nil || got.Meta["k"] != "v" {
		t.Fatalf("%+v", got)
	}
}

func TestDepthLimit(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(`{"x":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	for _, n := range []int{maxDepth, maxDepth + 1} {
		err := DecodeObject(deep(n), func(string, *Value) error { return nil })
		if want := n <= maxDepth; (err == nil) != want || json.Valid(deep(n)) != want || Valid(deep(n)) != want {
			t.Errorf("depth %d: DecodeObject error %v, json.Valid %t, Valid %t", n, err, json.Valid(deep(n)), Valid(deep(n)))
		}
	}
}

// TestStrictErrorDetails: what a caller that reports errors itself (the
// host's strict parser) reads from them: the class of a syntax error, the
// offset where the input stops fitting, and a duplicate's name and offset.
func TestStrictErrorDetails(t *testing.T) {
	raw := func(v *Value) error { var b []byte; return v.Raw(&b) }
	for _, tc := range []struct {
		in     string
		class  error // ErrTooDeep, ErrAmbiguousText or nil
		offset int
	}{
		{`{"a":tru}`, nil, 8}, // the first byte of the literal that differs
		{`[nul`, nil, 4},      // the end of the input
		{`[1] x`, nil, 4},     // trailing data
		{`"\u00G0"`, nil, 5},  // the first byte that is not a hex digit
		{`["a","\udc00"]`, ErrAmbiguousText, 6},
		{"{\"k\":\"a\xffb\"}", ErrAmbiguousText, 7},
		{strings.Repeat("[", maxDepth+1), ErrTooDeep, maxDepth},
		{`{"x":` + strings.Repeat("{\"x\":", maxDepth) + `1` + strings.Repeat("}", maxDepth+1), ErrTooDeep, 5 + 5*(maxDepth-1)},
	} {
		err := DecodeValueStrict([]byte(tc.in), raw)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != tc.offset {
			t.Errorf("%.40s: %v, want a *SyntaxError at offset %d", tc.in, err, tc.offset)
			continue
		}
		for _, class := range []error{ErrTooDeep, ErrAmbiguousText} {
			if errors.Is(err, class) != (class == tc.class) {
				t.Errorf("%.40s: errors.Is(%v, %v) = %t", tc.in, err, class, !(class == tc.class))
			}
		}
	}

	err := DecodeValueStrict([]byte(`[{"x":{"a":1, "a":2}}]`), raw)
	var de *DuplicateFieldError
	var fe *FieldError
	if !errors.Is(err, ErrDuplicateField) || !errors.As(err, &de) || de.Name != "a" || de.Offset != 14 ||
		!errors.As(err, &fe) || fe.Path != "[0].x.a" || err.Error() != "codec: [0].x.a: duplicate field" {
		t.Errorf("duplicate: %v (%#v)", err, de)
	}
}

// TestDecodeValueStrict reads a value of any type, refuses what follows
// it, and checks a value fn leaves unread.
func TestDecodeValueStrict(t *testing.T) {
	var s string
	if err := DecodeValueStrict([]byte(` "x\u00e9" `), func(v *Value) error { return v.String(&s) }); err != nil || s != "xé" {
		t.Errorf("string: %v %q", err, s)
	}
	var kind Kind
	if err := DecodeValueStrict([]byte(`null`), func(v *Value) error { kind = v.Kind(); return nil }); err != nil || kind != KindNull {
		t.Errorf("null: %v %v", err, kind)
	}
	for in, want := range map[string]string{
		`[1] [2]`:  `trailing data after the JSON value at offset 4`,
		`[1,]`:     `invalid number at offset 3`, // unread, still checked
		`"\ud800"`: `ambiguous text: unpaired UTF-16 surrogate escape at offset 1`,
		``:         `unexpected end of input, want a value at offset 0`,
	} {
		err := DecodeValueStrict([]byte(in), func(v *Value) error {
			if v.Kind() == KindString {
				return v.String(&s)
			}
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	stop := errors.New("stop")
	if err := DecodeValueStrict([]byte(`{}`), func(*Value) error { return stop }); err != stop {
		t.Errorf("fn's error: %v, want it as it is", err)
	}
}

// TestDeepErrorPath: an error at the bottom of input nested as deep as
// allowed keeps a bounded path (prefixing it at every level would copy
// it once per level, quadratic in the input), the innermost part after
// "…".
func TestDeepErrorPath(t *testing.T) {
	in := `{"r":` + strings.Repeat(`{"abc":`, maxDepth-1) + `"\ud800"` + strings.Repeat("}", maxDepth)
	err := DecodeObjectStrict([]byte(in), func(_ string, v *Value) error { var b []byte; return v.Raw(&b) })
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrAmbiguousText) {
		t.Fatalf("%.200v", err)
	}
	if !strings.HasPrefix(fe.Path, "…") || !strings.HasSuffix(fe.Path, ".abc.abc") || len(fe.Path) > maxPath+len("….abc") {
		t.Errorf("path %.40q… (%d bytes), want at most %d bytes, cut at the front", fe.Path, len(fe.Path), maxPath+len("….abc"))
	}
	// A path within the bound is whole.
	err = DecodeObjectStrict([]byte(`{"r":{"a":[{"b":"\ud800"}]}}`), func(_ string, v *Value) error { var b []byte; return v.Raw(&b) })
	if !errors.As(err, &fe) || fe.Path != "r.a[0].b" {
		t.Errorf("%v", err)
	}
}

func TestValueReadTwice(t *testing.T) {
	err := DecodeObject([]byte(`{"s":"x"}`), func(name string, v *Value) error {
		var s string
		if err := v.String(&s); err != nil {
			return err
		}
		return v.String(&s)
	})
	if err == nil || !strings.Contains(err.Error(), "read twice") {
		t.Fatalf("error %v", err)
	}
}

func TestSkipAcceptsUnderStrict(t *testing.T) {
	var s string
	err := DecodeObjectStrict([]byte(`{"s":"x","ignored":{"a":[1]}}`), func(name string, v *Value) error {
		if name == "s" {
			return v.String(&s)
		}
		return v.Skip()
	})
	if err != nil || s != "x" {
		t.Fatalf("%v %q", err, s)
	}
}

func TestForm(t *testing.T) {
	var f Form
	f.Add("amount", "2000")
	f.Add("metadata[connhost_key]", "ck 1/é")
	if got, want := f.String(), "amount=2000&metadata%5Bconnhost_key%5D=ck+1%2F%C3%A9"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

func ExampleDecodeObject() {
	body := []byte(`{"id":"pi_123","object":"payment_intent","amount":2000,"metadata":{"order":"42"},"livemode":false}`)
	var id string
	var amount int64
	var meta map[string]string
	err := DecodeObject(body, func(name string, v *Value) error {
		switch name {
		case "id":
			return v.String(&id)
		case "amount":
			return v.Int64(&amount)
		case "metadata":
			return v.StringMap(&meta)
		}
		return nil // skipped
	})
	fmt.Println(id, amount, meta["order"], err)
	// Output: pi_123 2000 42 <nil>
}

func ExampleAppendObject() {
	desc := "order 42"
	b := AppendObject(nil, func(o *Object) {
		o.String("payment_intent", "pi_123")
		o.Int("amount", 2000)
		o.OptString("description", &desc)
		o.Strings("tags", []string{"a", "<b>"})
	})
	fmt.Println(string(b))
	// Output: {"payment_intent":"pi_123","amount":2000,"description":"order 42","tags":["a","\u003cb\u003e"]}
}

// A connector that passes fields through reads them raw and writes them
// back, and reads a price as a float, without encoding/json.
func ExampleValue_Raw() {
	args := []byte(`{"record": {"name": "Ada", "tags": ["a", "b"], "score": 9.5}, "price": 12.75}`)
	var record []byte
	var price float64
	err := DecodeObjectStrict(args, func(name string, v *Value) error {
		switch name {
		case "record":
			return v.Raw(&record) // whatever it holds, checked and kept as written
		case "price":
			return v.Float64(&price)
		}
		return v.Skip()
	})
	body := AppendObject(nil, func(o *Object) {
		o.Raw("data", record) // compacted as encoding/json writes a json.RawMessage
		o.Float("price_with_tax", price*1.2)
	})
	fmt.Println(string(body), err)
	err = DecodeObjectStrict([]byte(`{"record": {"name": "Ada", "name": "Eve"}}`), func(name string, v *Value) error { return v.Raw(&record) })
	fmt.Println(err)
	// Output:
	// {"data":{"name":"Ada","tags":["a","b"],"score":9.5},"price_with_tax":15.299999999999999} <nil>
	// codec: record.name: duplicate field
}

// TestFloat: numbers read as encoding/json reads them into a float64, and
// written as it writes one.
func TestFloat(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{"1", "1"}, {"-0.5", "-0.5"}, {"1e21", "1e+21"}, {"1e-7", "1e-7"}, {"0.000001", "0.000001"}, {"123456789012345678901234567890", "1.2345678901234568e+29"},
	} {
		var f float64
		if err := DecodeObject([]byte(`{"f":`+tc.in+`}`), func(_ string, v *Value) error { return v.Float64(&f) }); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		var w struct{ F float64 }
		_ = json.Unmarshal([]byte(`{"F":`+tc.in+`}`), &w)
		got := AppendObject(nil, func(o *Object) { o.Float("f", f) })
		want, _ := json.Marshal(map[string]float64{"f": w.F})
		if f != w.F || string(got) != string(want) || string(got) != `{"f":`+tc.out+`}` {
			t.Errorf("%s: read %v (encoding/json %v), wrote %s (encoding/json %s)", tc.in, f, w.F, got, want)
		}
	}
	var f float64
	err := DecodeObject([]byte(`{"f":1e400}`), func(_ string, v *Value) error { return v.Float64(&f) })
	if !errors.Is(err, ErrType) {
		t.Errorf("1e400: %v, want ErrType", err)
	}
}

// TestStringWordBoundaries: a byte that ends the plain run, at every
// offset around the eight-byte steps, is seen as encoding/json sees it.
func TestStringWordBoundaries(t *testing.T) {
	for _, c := range []byte{'"', '\\', 0x00, 0x1F, 0x20, 0x7F, 0x80, 0xFF, 'x'} {
		for n := 0; n < 26; n++ {
			for _, tail := range []string{`"`, `n"`, `u00e9"`, ``} {
				s := append([]byte(`"`+strings.Repeat("a", n)), c)
				s = append(s, tail...)
				if got, want := Valid(s), json.Valid(s); got != want {
					t.Errorf("Valid(%q) = %t, encoding/json says %t", s, got, want)
				}
				var v string
				got := DecodeObject(append(append([]byte(`{"s":`), s...), '}'), func(_ string, val *Value) error { return val.String(&v) })
				var w struct{ S string }
				want := json.Unmarshal(append(append([]byte(`{"s":`), s...), '}'), &w)
				if (got == nil) != (want == nil) || got == nil && v != w.S {
					t.Errorf("decode %q: %v %q; encoding/json: %v %q", s, got, v, want, w.S)
				}
			}
		}
	}
}
