package ledger

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// require is a small stand-in for testify's require: testify's current
// release needs a go.sum entry (go.yaml.in/yaml/v3) that go.mod does not
// carry, and go.mod is not this package's to change.
var require requireT

type requireT struct{}

func msg(args []any) string {
	if len(args) == 0 {
		return ""
	}
	if f, ok := args[0].(string); ok {
		return ": " + fmt.Sprintf(f, args[1:]...)
	}
	return ": " + fmt.Sprint(args...)
}

func (requireT) NoError(t testing.TB, err error, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v%s", err, msg(args))
	}
}

func (requireT) ErrorIs(t testing.TB, err, target error, args ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v is not %v%s", err, target, msg(args))
	}
}

func (requireT) Equal(t testing.TB, want, got any, args ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("not equal%s:\nwant %#v\ngot  %#v", msg(args), want, got)
	}
}

func (requireT) NotEqual(t testing.TB, a, b any, args ...any) {
	t.Helper()
	if reflect.DeepEqual(a, b) {
		t.Fatalf("unexpectedly equal%s: %#v", msg(args), a)
	}
}

func (requireT) True(t testing.TB, v bool, args ...any) {
	t.Helper()
	if !v {
		t.Fatalf("not true%s", msg(args))
	}
}

func (requireT) False(t testing.TB, v bool, args ...any) {
	t.Helper()
	if v {
		t.Fatalf("not false%s", msg(args))
	}
}

func (requireT) NotNil(t testing.TB, v any, args ...any) {
	t.Helper()
	if v == nil || (reflect.ValueOf(v).Kind() == reflect.Func && reflect.ValueOf(v).IsNil()) ||
		(reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
		t.Fatalf("nil%s", msg(args))
	}
}

// Contains: substring for strings, element for slices.
func (requireT) Contains(t testing.TB, container, elem any, args ...any) {
	t.Helper()
	if s, ok := container.(string); ok {
		if !strings.Contains(s, elem.(string)) {
			t.Fatalf("%q does not contain %q%s", s, elem, msg(args))
		}
		return
	}
	v := reflect.ValueOf(container)
	for i := 0; i < v.Len(); i++ {
		if reflect.DeepEqual(v.Index(i).Interface(), elem) {
			return
		}
	}
	t.Fatalf("%#v does not contain %#v%s", container, elem, msg(args))
}

func (requireT) Len(t testing.TB, v any, n int, args ...any) {
	t.Helper()
	if l := reflect.ValueOf(v).Len(); l != n {
		t.Fatalf("len %d, want %d%s", l, n, msg(args))
	}
}

func (requireT) Positive(t testing.TB, v any, args ...any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	ok := false
	switch rv.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		ok = rv.Int() > 0
	case reflect.Float64, reflect.Float32:
		ok = rv.Float() > 0
	case reflect.Uint64, reflect.Uint:
		ok = rv.Uint() > 0
	}
	if !ok {
		t.Fatalf("%v is not positive%s", v, msg(args))
	}
}
