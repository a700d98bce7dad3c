package manifests

import (
	"strings"
	"testing"
)

// TestSearchTemplate: which provider.search templates load, and why the
// others do not.
func TestSearchTemplate(t *testing.T) {
	for _, tc := range []struct{ name, tmpl, err string }{
		{"stripe", "https://dashboard.stripe.com/search?query=metadata%5Bconnhost_execution_id%5D%3A{execution_id}", ""},
		{"both in path and query", "http://127.0.0.1:8025/calls/{execution_id}?key={key}", ""},
		{"no placeholder", "https://status.example.com/", ""},
		{"unknown placeholder", "https://x.example/?q={session_id}", `"{session_id}": the only placeholders`},
		{"lone brace", "https://x.example/?q={execution_id", `"{execution_id": the only placeholders`},
		{"closing brace", "https://x.example/?q=}", `"}": the only placeholders`},
		{"placeholder in host", "https://{key}.example.com/", "a placeholder in the host"},
		{"placeholder after host text", "https://x{key}/", "a placeholder in the host"},
		{"placeholder as host", "https://{execution_id}/", "want an http or https URL with a host"},
		{"placeholder in scheme", "{key}://x.example/", "not a URL"},
		{"javascript", "javascript:alert({key})", "want an http or https URL"},
		{"relative", "/search?q={key}", "want an http or https URL"},
		{"user", "https://u:p@x.example/?q={key}", "no user"},
		{"space", "https://x.example/?q= {key}", "white space"},
		{"quote", `https://x.example/?q="{key}`, "a quote"},
		{"too long", "https://x.example/?q=" + strings.Repeat("a", 2048), "at most 2048 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSearch(tc.tmpl)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("checkSearch(%q) = %v, want it accepted", tc.tmpl, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("checkSearch(%q) = %v, want an error saying %q", tc.tmpl, err, tc.err)
			}
		})
	}
}

// TestSearchURL: a value is escaped for where it stands, so no value
// adds a parameter, a path segment or a fragment to the link.
func TestSearchURL(t *testing.T) {
	p := Provider{Search: "https://x.example/calls/{execution_id}?key={key}&q=id%3A{execution_id}#{key}"}
	for _, tc := range []struct{ exec, key, want string }{
		{"ex_abc", "ck_def", "https://x.example/calls/ex_abc?key=ck_def&q=id%3Aex_abc#ck_def"},
		{"a/../b?c", "k&admin=1#f", "https://x.example/calls/a%2F..%2Fb%3Fc?key=k%26admin%3D1%23f&q=id%3Aa%2F..%2Fb%3Fc#k%26admin%3D1%23f"},
		{"ex {key}", "", "https://x.example/calls/ex%20%7Bkey%7D?key=&q=id%3Aex+%7Bkey%7D#"},
	} {
		if got := p.SearchURL(tc.exec, tc.key); got != tc.want {
			t.Errorf("SearchURL(%q, %q)\n got %s\nwant %s", tc.exec, tc.key, got, tc.want)
		}
	}
	if got := (Provider{}).SearchURL("ex_abc", "ck_def"); got != "" {
		t.Errorf("no template: SearchURL = %q, want \"\"", got)
	}
}
