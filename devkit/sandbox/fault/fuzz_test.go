package fault

import (
	"strings"
	"testing"
)

// Rules posted to the control API are decoded strictly and validated.
func FuzzDecodeRules(f *testing.F) {
	for _, s := range []string{`{"kind":"status","status":503}`, `[{"kind":"hang","delay":"1s"}]`, `{"kind":"drop","bogus":1}`, `[`, `{"delay":-5}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := decodeRules(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, r := range rules {
			_ = r.Validate()
		}
	})
}
