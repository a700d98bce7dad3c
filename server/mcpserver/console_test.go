package mcpserver_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/mcpserver"
)

// URL-mode elicitation (MCP 2025-11-25): a gated call sends the runtime's
// user to the console's page of the call, where a reviewer signed in to
// the console decides. Tested with the official Go SDK's client against
// /mcp of an HTTP API that serves the real console.

// linkRecorder is a client's elicitation handler: it records what it
// was sent and answers action, and records the completions it hears of.
type linkRecorder struct {
	action    string
	mu        sync.Mutex
	asked     []*mcp.ElicitParams
	completed []string
	sent      chan *mcp.ElicitParams
}

func newLinkRecorder(action string) *linkRecorder {
	return &linkRecorder{action: action, sent: make(chan *mcp.ElicitParams, 8)}
}

func (l *linkRecorder) options(urlMode bool) *mcp.ClientOptions {
	o := &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			l.mu.Lock()
			l.asked = append(l.asked, req.Params)
			l.mu.Unlock()
			l.sent <- req.Params
			return &mcp.ElicitResult{Action: l.action}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			l.mu.Lock()
			l.completed = append(l.completed, req.Params.ElicitationID)
			l.mu.Unlock()
		},
	}
	if urlMode {
		o.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	}
	return o
}

func (l *linkRecorder) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.asked)
}

// reviewer is a browser of a principal who follows a link to the console,
// signs in there with its token when asked, and approves the call the
// page shows.
type reviewer struct {
	t     *testing.T
	c     *http.Client
	token string
}

func newReviewer(t *testing.T, token string) *reviewer {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &reviewer{t: t, c: &http.Client{Jar: jar}, token: token}
}

var (
	csrfRE    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	nextRE    = regexp.MustCompile(`name="next" value="([^"]+)"`)
	approveRE = regexp.MustCompile(`<form method="post" action="(/ui/approvals/[^"/]+/approve)"[^>]*>\s*<input type="hidden" name="csrf" value="([^"]+)">\s*<input type="hidden" name="digest" value="([^"]+)">`)
)

func (r *reviewer) get(link string) (*http.Response, string) {
	resp, err := r.c.Get(link)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, err = io.Copy(&b, resp.Body)
	require.NoError(r.t, err)
	return resp, b.String()
}

func (r *reviewer) post(link string, form url.Values) (*http.Response, string) {
	resp, err := r.c.PostForm(link, form)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, err = io.Copy(&b, resp.Body)
	require.NoError(r.t, err)
	return resp, b.String()
}

// approveAt follows link: a console that asks for a sign-in gets the
// reviewer's token, and the page's approve button is pressed. It returns
// the page the reviewer saw before approving.
func (r *reviewer) approveAt(link string) string {
	t := r.t
	resp, page := r.get(link)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	if strings.HasSuffix(resp.Request.URL.Path, "/ui/signin") {
		csrf, next := csrfRE.FindStringSubmatch(page), nextRE.FindStringSubmatch(page)
		require.NotNil(t, csrf, page)
		require.NotNil(t, next, page)
		signin := resp.Request.URL.ResolveReference(&url.URL{Path: "/ui/signin"}).String()
		resp, page = r.post(signin, url.Values{"csrf": {csrf[1]}, "token": {r.token}, "next": {html.UnescapeString(next[1])}})
		require.Equal(t, http.StatusOK, resp.StatusCode, page)
	}
	u, err := url.Parse(link)
	require.NoError(t, err)
	require.Equal(t, u.Path, resp.Request.URL.Path, "after the sign-in the reviewer is on the linked page")
	m := approveRE.FindStringSubmatch(page)
	require.NotNil(t, m, "the linked page offers the approve button: %s", page)
	resp, after := r.post(u.ResolveReference(&url.URL{Path: m[1]}).String(), url.Values{"csrf": {m[2]}, "digest": {m[3]}, "reason": {"checked on the page"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, after)
	return page
}

// TestConsoleLinkHeldCallRunsOnceApproved: a runtime that may not approve,
// whose client declared URL mode, calls a gated payment and waits
// (io.connhost/wait). Its user is sent the console's page of the call (no
// token in it; the tool and the amount in the message); the client's
// "accept" decides nothing; a reviewer who follows the link, signs in and
// approves there lets the held call run, once, and the client hears that
// the elicitation completed. The same call sent again charges nothing.
// In protocol 2026-07-28 the link is an input request of the call's first
// answer, and the SDK's client sends the call again with its answer.
func TestConsoleLinkHeldCallRunsOnceApproved(t *testing.T) {
	f := newFixture(t, overHTTP, fixtureOpts{console: true})
	for _, v := range []string{legacy, modern} {
		t.Run(v, func(t *testing.T) { heldLink(t, f, v) })
	}
}

func heldLink(t *testing.T, f *fixture, version string) {
	before := charges()
	links := newLinkRecorder("accept")
	cs := f.client(clientOpts{version: version, client: links.options(true)})
	session := "s-link-held-" + version
	meta := ids(session, "c1")
	meta[mcpserver.MetaWait] = 60 // a hold that never ends would keep the test's server open

	type answer struct {
		res *mcp.CallToolResult
		out mcpserver.Result
	}
	done := make(chan answer, 1)
	go func() {
		res, out := callTool(t, cs, "payments.create_payment", payment, meta)
		done <- answer{res, out}
	}()
	var sent *mcp.ElicitParams
	select {
	case sent = <-links.sent:
	case a := <-done:
		t.Fatalf("answered before the link was sent: %s", text(a.res))
	case <-time.After(2 * time.Minute):
		t.Fatal("no link was sent within two minutes")
	}
	rec, err := f.ex.Ledger().Get(context.Background(), ledger.ExecutionID(ledger.DefaultNamespace, session, "c1"))
	require.NoError(t, err)
	require.Equal(t, ledger.StateAwaitingApproval, rec.State, "the client's accept decided nothing")

	require.Equal(t, "url", sent.Mode)
	require.Equal(t, f.srv.URL+mcpserver.ConsolePage+rec.ID, sent.URL)
	require.Equal(t, rec.Approval.ID, sent.ElicitationID)
	u, err := url.Parse(sent.URL)
	require.NoError(t, err)
	require.Nil(t, u.User)
	require.Empty(t, u.RawQuery)
	require.Empty(t, u.Fragment)
	for _, tok := range []string{tokenRuntime, tokenRita, tokenApprover} {
		require.NotContains(t, sent.URL, tok)
		require.NotContains(t, sent.Message, tok)
	}
	require.Contains(t, sent.Message, "payments.create_payment")
	require.Contains(t, sent.Message, "5.00 USD", "the amount the reviewer will see")
	require.Contains(t, sent.Message, rec.Approval.ID)
	require.Contains(t, sent.Message, "decides nothing")
	require.Equal(t, before, charges())

	page := newReviewer(t, tokenApprover).approveAt(sent.URL)
	require.Contains(t, page, rec.Approval.ID)
	require.Contains(t, page, "Approve as olga")

	a := <-done
	require.False(t, a.res.IsError, text(a.res))
	require.Equal(t, "succeeded", a.out.Status)
	require.False(t, a.out.Recorded, "run in the held request")
	require.Equal(t, before+1, charges())
	require.Equal(t, 1, links.count(), "one link")
	res, again := callTool(t, cs, "payments.create_payment", payment, ids(session, "c1"))
	require.False(t, res.IsError, text(res))
	require.True(t, again.Recorded)
	require.Equal(t, before+1, charges(), "the same call sent again charges nothing")
	if version == modern {
		return // no stream to send notifications/elicitation/complete on
	}
	require.Eventually(t, func() bool {
		links.mu.Lock()
		defer links.mu.Unlock()
		return len(links.completed) == 1 && links.completed[0] == rec.Approval.ID
	}, 10*time.Second, 10*time.Millisecond, "notifications/elicitation/complete names the link's elicitation")
}

// TestConsoleLinkOnlyToURLClients: the link goes only to a client that
// declared URL mode. A client
// that declared form elicitation only (and may not approve), one that
// declared none, and a stateless (2026-07-28) request get none, and
// answer awaiting_approval as before. A URL client whose user declines
// gets the link (in both protocol generations), and the call is still
// decided only by a reviewer: a reviewer's approval through the API lets
// the runtime's retry run it once.
func TestConsoleLinkOnlyToURLClients(t *testing.T) {
	f := newFixture(t, overHTTP, fixtureOpts{console: true})
	for _, tt := range []struct {
		name    string
		version string
		urlMode bool
		handler bool
	}{
		{"form-only", legacy, false, true},
		{"no-elicitation", legacy, false, false},
		{"stateless-form-only", modern, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			links := newLinkRecorder("accept")
			var co *mcp.ClientOptions
			if tt.handler {
				co = links.options(tt.urlMode)
			}
			cs := f.client(clientOpts{version: tt.version, client: co})
			res, out := callTool(t, cs, "payments.create_payment", payment, ids("s-nolink-"+tt.name, "c1"))
			require.False(t, res.IsError, text(res))
			require.Equal(t, "awaiting_approval", out.Status)
			require.Zero(t, links.count(), "no elicitation of any mode")
			require.NotContains(t, text(res), f.srv.URL)
		})
	}
	for _, v := range []string{legacy, modern} {
		t.Run("declined-"+v, func(t *testing.T) {
			before := charges()
			links := newLinkRecorder("decline")
			cs := f.client(clientOpts{version: v, client: links.options(true)})
			meta := ids("s-link-declined-"+v, "c1")
			res, out := callTool(t, cs, "payments.create_payment", payment, meta)
			require.False(t, res.IsError, text(res))
			require.Equal(t, "awaiting_approval", out.Status, "a decline rejects nothing")
			require.Equal(t, 1, links.count())
			require.Contains(t, text(res), "declined to open the console's page")
			require.NotContains(t, text(res), f.srv.URL, "the model is not given the link")
			require.Equal(t, before, charges())

			f.approveOverHTTP(out.Approval.ID, out.Approval.ArgsDigest)
			res, done := callTool(t, cs, "payments.create_payment", payment, meta)
			require.False(t, res.IsError, text(res))
			require.Equal(t, "succeeded", done.Status)
			require.Equal(t, before+1, charges())
			res, _ = callTool(t, cs, "payments.create_payment", payment, meta)
			require.False(t, res.IsError, text(res))
			require.Equal(t, before+1, charges(), "once")
		})
	}
}

// TestConsoleLinkNeedsAConsoleURL: a server that knows no URL humans reach
// sends no link, whatever the client declared.
func TestConsoleLinkNeedsAConsoleURL(t *testing.T) {
	f := newFixture(t, overHTTP)
	links := newLinkRecorder("accept")
	cs := f.client(clientOpts{version: legacy, client: links.options(true)})
	res, out := callTool(t, cs, "payments.create_payment", payment, ids("s-nourl", "c1"))
	require.False(t, res.IsError, text(res))
	require.Equal(t, "awaiting_approval", out.Status)
	require.Zero(t, links.count())
}
