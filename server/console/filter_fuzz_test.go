package console

import (
	"net/url"
	"testing"
)

// FuzzListFilter feeds the Approvals and Recovery filters any query
// string. parseListFilter never panics; a filter it accepts keeps its
// amounts within the digits parseAmount allows, and reads back the same
// from its own Query (the next page's link and the page a decision
// returns to hold the very filter the reviewer set). parseCursor accepts
// only "<integer>.<id>".
func FuzzListFilter(f *testing.F) {
	for _, q := range []string{
		"", "tool=pay&session=team&namespace=acme&principal=bot-a", "from=2026-03-01T09:03&to=2026-03-01T09:45",
		"currency=usd&amount_min=30&amount_max=600.50", "currency=EUR", "currency=US", "amount_min=1e9", "amount_min=-5", "amount_min=99999999999999999999",
		"sort=newest&group=session", "sort=expiry", "sort=sideways&group=tool", "after=17.ex_abc", "after=x.y",
		"from=2026-13-01T00:00", "amount_min=.5", "amount_min=5.", "tool=%00%E2%80%AE",
	} {
		f.Add(q, "approvals")
		f.Add(q, "recovery")
	}
	f.Fuzz(func(t *testing.T, raw, page string) {
		if page != "approvals" {
			page = "recovery"
		}
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		if p, err := parseCursor(q.Get("after")); err == nil && p.id == "" {
			t.Fatalf("parseCursor(%q) accepted an empty id", q.Get("after"))
		}
		lf, err := parseListFilter(q, page)
		if err != nil {
			return
		}
		for _, a := range []string{lf.AmountMin, lf.AmountMax} {
			if a != "" && len(a) > 28 {
				t.Fatalf("amount %q accepted", a)
			}
		}
		back, err := url.ParseQuery(string(lf.Query(""))[min(1, len(lf.Query(""))):])
		if err != nil {
			t.Fatalf("Query %q does not parse: %v", lf.Query(""), err)
		}
		again, err := parseListFilter(back, page)
		if err != nil {
			t.Fatalf("the filter's own Query %q is refused: %v", lf.Query(""), err)
		}
		if again.Query("") != lf.Query("") || again.Sort != lf.Sort || again.Group != lf.Group || again.Ordered() != lf.Ordered() {
			t.Fatalf("the filter does not read back from its Query:\n%+v\n%+v", lf, again)
		}
	})
}
