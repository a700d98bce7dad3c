package audit

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// require is a small stand-in for testify's require: testify v1.12.1 needs a
// go.sum entry (go.yaml.in/yaml/v3) the module does not have yet, and go.sum
// is not this package's to edit. Every check stops the test on failure.
var require checks

type checks struct{}

func (checks) NoError(t testing.TB, err error, msg ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v %v", err, msg)
	}
}

func (checks) Error(t testing.TB, err error, msg ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error %v", msg)
	}
}

func (checks) ErrorIs(t testing.TB, err, target error, msg ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v is not %v %v", err, target, msg)
	}
}

func (checks) ErrorAs(t testing.TB, err error, target any, msg ...any) {
	t.Helper()
	if !errors.As(err, target) {
		t.Fatalf("error %v (%T) is not a %T %v", err, err, target, msg)
	}
}

func (checks) Equal(t testing.TB, want, got any, msg ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("not equal %v\nwant: %#v\n got: %#v", msg, want, got)
	}
}

func (checks) NotEqual(t testing.TB, a, b any, msg ...any) {
	t.Helper()
	if reflect.DeepEqual(a, b) {
		t.Fatalf("unexpectedly equal %v: %#v", msg, a)
	}
}

func (checks) True(t testing.TB, v bool, msg ...any) {
	t.Helper()
	if !v {
		t.Fatalf("expected true %v", msg)
	}
}

func (checks) False(t testing.TB, v bool, msg ...any) {
	t.Helper()
	if v {
		t.Fatalf("expected false %v", msg)
	}
}

func (checks) Nil(t testing.TB, v any, msg ...any) {
	t.Helper()
	if v != nil && !reflect.ValueOf(v).IsNil() {
		t.Fatalf("expected nil, got %#v %v", v, msg)
	}
}

func (checks) NotNil(t testing.TB, v any, msg ...any) {
	t.Helper()
	if v == nil || reflect.ValueOf(v).IsNil() {
		t.Fatalf("expected non-nil %v", msg)
	}
}

func (checks) Len(t testing.TB, v any, n int, msg ...any) {
	t.Helper()
	if l := reflect.ValueOf(v).Len(); l != n {
		t.Fatalf("length %d, want %d %v", l, n, msg)
	}
}

func (checks) Empty(t testing.TB, v any, msg ...any) {
	t.Helper()
	if v != nil && reflect.ValueOf(v).Len() != 0 {
		t.Fatalf("expected empty, got %#v %v", v, msg)
	}
}

func (checks) NotEmpty(t testing.TB, v any, msg ...any) {
	t.Helper()
	if v == nil || reflect.ValueOf(v).Len() == 0 {
		t.Fatalf("expected non-empty %v", msg)
	}
}

func (checks) Contains(t testing.TB, s, sub string, msg ...any) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q %v", s, sub, msg)
	}
}

func (checks) NotContains(t testing.TB, s, sub string, msg ...any) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Fatalf("%q contains %q %v", s, sub, msg)
	}
}
