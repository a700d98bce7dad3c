package manifests

import (
	"strings"
	"testing"
)

// TestReviewDigestIgnoresThePinOnly: pinning a manifest (with or without
// a sha256 line before, with a trailing comment or not) keeps its review
// digest; changing anything else changes it.
func TestReviewDigestIgnoresThePinOnly(t *testing.T) {
	base := `[connector]
name = "hooks"
version = "1.0.0"
abi = 1
module = "hooks.wasm"
sha256 = ""   # pinned by connhost build --pin

[[operation]]
name = "ping"
description = "Ask the provider whether it is up."
effect = "read"
input_schema = '{"type": "object", "additionalProperties": false}'
`
	digestOf := func(text string) string {
		t.Helper()
		m, err := Parse("hooks.toml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return m.ReviewDigest()
	}
	want := digestOf(base)
	pinned, err := SetSHA256([]byte(base), strings.Repeat("a", 64))
	if err != nil {
		t.Fatal(err)
	}
	repinned, _ := SetSHA256(pinned, strings.Repeat("b", 64))
	unpinned := strings.Replace(base, "sha256 = \"\"   # pinned by connhost build --pin\n", "", 1)
	pinnedLater, _ := SetSHA256([]byte(unpinned), strings.Repeat("c", 64))
	for name, text := range map[string]string{"pinned": string(pinned), "re-pinned": string(repinned), "pinned from no sha256 line": string(pinnedLater)} {
		if got := digestOf(text); got != want {
			t.Errorf("%s: review digest %s, want %s", name, got, want)
		}
	}
	for name, text := range map[string]string{
		"a value":   strings.Replace(string(pinned), `effect = "read"`, `effect = "read"`+"\nmax_attempts = 2", 1),
		"a comment": string(pinned) + "# reviewed\n",
		"the name":  strings.Replace(string(pinned), `name = "ping"`, `name = "pong"`, 1),
	} {
		if got := digestOf(text); got == want {
			t.Errorf("changing %s kept the review digest", name)
		}
	}
}
