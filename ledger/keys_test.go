package ledger

import (
	"bytes"
	"testing"
)

func TestFenceSessionPrefix(t *testing.T) {
	for _, c := range [][3]string{
		{"default", "s1", "ex_1"},
		{"", "", ""},
		{"a\x00b", "c", "d"},
		{"a", "b\x00c", "\x00"},
		{"\x00\x00", "\x01", "\xff\x00\x01"},
	} {
		k := fenceKey(c[0], c[1], c[2])
		got, ok := fenceSessionPrefix(k)
		if !ok || !bytes.Equal(got, fencePrefix(c[0], c[1])) {
			t.Errorf("fenceSessionPrefix(fenceKey(%q)) = %q, %v; want %q", c, got, ok, fencePrefix(c[0], c[1]))
		}
	}
	for _, bad := range []string{"", "f/", "f/a", "f/a\x00\x01", "f/a\x00\x02b\x00\x01", "r/a\x00\x01b\x00\x01"} {
		if p, ok := fenceSessionPrefix([]byte(bad)); ok {
			t.Errorf("fenceSessionPrefix(%q) = %q, want refusal", bad, p)
		}
	}
}

// FuzzFenceSessionPrefix: the session part of any fence key is found
// exactly, and arbitrary bytes never panic or yield a prefix that is not
// one.
func FuzzFenceSessionPrefix(f *testing.F) {
	f.Add("default", "s1", "ex_1", []byte("f/x"))
	f.Add("a\x00", "\x00b", "", []byte("f/\x00\xff\x00\x01"))
	f.Fuzz(func(t *testing.T, ns, session, id string, raw []byte) {
		got, ok := fenceSessionPrefix(fenceKey(ns, session, id))
		if !ok || !bytes.Equal(got, fencePrefix(ns, session)) {
			t.Fatalf("fenceSessionPrefix(fenceKey(%q, %q, %q)) = %q, %v", ns, session, id, got, ok)
		}
		if p, ok := fenceSessionPrefix(raw); ok && !bytes.HasPrefix(raw, p) {
			t.Fatalf("prefix %q is not a prefix of %q", p, raw)
		}
	})
}

func TestAwaitNamespace(t *testing.T) {
	for _, c := range [][2]string{{"default", "ex_1"}, {"", ""}, {"a\x00b", "c"}, {"\x00\x00", "\xff\x00\x01"}} {
		got, ok := awaitNamespace(awaitKey(c[0], c[1]))
		if !ok || got != c[0] {
			t.Errorf("awaitNamespace(awaitKey(%q)) = %q, %v; want %q", c, got, ok, c[0])
		}
	}
	for _, bad := range []string{"", "a/", "a/x", "a/x\x00\x01", "a/x\x00\x02y\x00\x01", "f/x\x00\x01y\x00\x01"} {
		if ns, ok := awaitNamespace([]byte(bad)); ok {
			t.Errorf("awaitNamespace(%q) = %q, want refusal", bad, ns)
		}
	}
}

// FuzzAwaitNamespace: the namespace of any approval key is found exactly,
// and arbitrary bytes never panic.
func FuzzAwaitNamespace(f *testing.F) {
	f.Add("default", "ex_1", []byte("a/x"))
	f.Add("a\x00", "", []byte("a/\x00\xff\x00\x01"))
	f.Fuzz(func(t *testing.T, ns, id string, raw []byte) {
		if got, ok := awaitNamespace(awaitKey(ns, id)); !ok || got != ns {
			t.Fatalf("awaitNamespace(awaitKey(%q, %q)) = %q, %v", ns, id, got, ok)
		}
		_, _ = awaitNamespace(raw)
	})
}
