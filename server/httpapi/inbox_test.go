package httpapi

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestListApprovalsByExpiry: GET /v1/executions?state=awaiting_approval&
// order=expiry lists the calls awaiting approval whose approval expires
// soonest first across all of them, however many of another tenant's
// came after: tenant-a's call, the first asked and the soonest to expire,
// heads the listing under tenant-b's flood, total says how many there are
// (counted, within the principal's namespaces), and paging by next lists
// each call once, in expiry order, no page holding more than MaxListBytes
// of them (calls of 240 KB end a page early). after is a position there:
// another tenant's execution id continues a listing exactly as an unknown
// one does.
func TestListApprovalsByExpiry(t *testing.T) {
	env := newTestExecutor(t)
	ps := append(slices.Clone(tenants), Principal{Name: "uma", Roles: []Role{RoleApprover}, Token: "tok-uma", Namespaces: []string{"tenant-a", "tenant-b"}})
	base := env.serve(t, Options{Principals: ps}).URL
	a := client{t: t, base: base, token: "tok-a"}
	b := client{t: t, base: base, token: "tok-b"}
	uma := client{t: t, base: base, token: "tok-uma"}
	rita := client{t: t, base: base, token: "tok-rita"}
	bob := client{t: t, base: base, token: "tok-bob"}

	mine := a.post("/v1/executions", execReq("s1", "a-1", "gated.echo", `{"msg":"tenant-a"}`)).result(t)
	want := []string{mine.ExecutionID}
	for i := range 30 {
		env.clock.Advance(time.Second)
		want = append(want, b.post("/v1/executions", execReq("flood", fmt.Sprintf("b-%02d", i), "gated.echo", `{"msg":"flood"}`)).result(t).ExecutionID)
	}
	long := strings.Repeat("A", 240<<10)
	for i := range 6 {
		env.clock.Advance(time.Second)
		want = append(want, b.post("/v1/executions", execReq("flood", fmt.Sprintf("long-%d", i), "gated.echo", `{"msg":"`+long+`"}`)).result(t).ExecutionID)
	}

	list := func(c client, query string) (ids []string, totals []int, largest int) {
		t.Helper()
		after := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 50, "the listing does not end")
			q := "/v1/executions?state=awaiting_approval&order=expiry&limit=10" + query
			if after != "" {
				q += "&after=" + url.QueryEscape(after)
			}
			r := c.get(q)
			require.Equal(t, 200, r.status, string(r.body))
			largest = max(largest, len(r.body))
			var l ListResponse
			r.decode(t, &l)
			for _, e := range l.Executions {
				ids = append(ids, e.ExecutionID)
			}
			require.NotNil(t, l.Total, "a listing of the calls awaiting approval says how many there are")
			totals = append(totals, *l.Total)
			if l.Next == "" {
				return ids, totals, largest
			}
			after = l.Next
		}
	}
	ids, totals, largest := list(uma, "")
	t.Logf("%d calls over %d pages, largest page %d bytes", len(ids), len(totals), largest)
	require.Equal(t, want, ids, "every call once, the soonest to expire first")
	require.Equal(t, 37, totals[0])
	require.LessOrEqual(t, largest, MaxListBytes+4096, "a page holds at most MaxListBytes of executions")

	ids, totals, _ = list(rita, "")
	require.Equal(t, []string{mine.ExecutionID}, ids)
	require.Equal(t, 1, totals[0], "rita counts tenant-a's calls only")
	ids, totals, _ = list(bob, "")
	require.Equal(t, want[1:], ids)
	require.Equal(t, 36, totals[0])
	ids, totals, _ = list(uma, "&namespace=tenant-a")
	require.Equal(t, []string{mine.ExecutionID}, ids)
	require.Equal(t, 1, totals[0])

	// after is a position: tenant-a's id and an unknown one answer alike.
	var foreign, unknown ListResponse
	bob.get("/v1/executions?state=awaiting_approval&order=expiry&after=0."+mine.ExecutionID).decode(t, &foreign)
	bob.get("/v1/executions?state=awaiting_approval&order=expiry&after=0.ex_nope").decode(t, &unknown)
	ids = nil
	for _, e := range foreign.Executions {
		ids = append(ids, e.ExecutionID)
	}
	require.Equal(t, want[1:len(foreign.Executions)+1], ids)
	require.Equal(t, len(unknown.Executions), len(foreign.Executions))
	require.Equal(t, unknown.Next, foreign.Next)

	uma.get("/v1/executions?order=expiry").problem(t, CodeBadRequest)
	uma.get("/v1/executions?state=succeeded&order=expiry").problem(t, CodeBadRequest)
	uma.get("/v1/executions?state=awaiting_approval&order=expiry&after="+mine.ExecutionID).problem(t, CodeBadRequest)
	uma.get("/v1/executions?state=awaiting_approval&order=oldest").problem(t, CodeBadRequest)
}
