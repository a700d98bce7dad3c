package console

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/argview"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
)

// pageNames are the templates in templates/, each rendered inside
// layout.html.
var pageNames = []string{"signin", "signedin", "refused", "approvals", "recovery", "executions", "execution", "connectors"}

func parsePages(now func() time.Time) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"vis":     vis,
		"when":    when,
		"until":   func(t time.Time) string { return relative(t.Sub(now())) },
		"since":   func(t time.Time) string { return relative(now().Sub(t)) },
		"crash":   crashText,
		"short":   shortDigest,
		"rawjson": func(b json.RawMessage) string { return vis(string(b)) },
		"roles":   rolesText,
		"trail":   trailOf,
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// vis shows s with the characters that would change how it reads
// (control, bidirectional, invisible) as escapes, as the approval view
// shows arguments (argview.Quote); html/template escapes the rest.
func vis(s string) string {
	q, escaped := argview.Quote(s)
	if !escaped {
		return s
	}
	return q
}

// trailRow is an event as the trail shows it: an evidence or reason
// that repeats an earlier row's text is folded to a reference to that
// row (a provider's error repeated by every retry is read once).
type trailRow struct {
	ledger.Event
	// SameEvidence and SameReason are the Seq of the earlier row whose
	// text this row's evidence or reason repeats (0: shown).
	SameEvidence, SameReason uint64
}

// minFold is the shortest text the trail folds: shorter ones read as
// quickly as a reference to them.
const minFold = 24

func trailOf(evs []ledger.Event) []trailRow {
	seen := map[string]uint64{}
	rows := make([]trailRow, len(evs))
	for i, ev := range evs {
		rows[i].Event = ev
		for _, f := range []struct {
			text string
			same *uint64
		}{{ev.Evidence, &rows[i].SameEvidence}, {ev.Reason, &rows[i].SameReason}} {
			if len(f.text) < minFold {
				continue
			}
			if seq, ok := seen[f.text]; ok {
				*f.same = seq
			} else {
				seen[f.text] = ev.Seq
			}
		}
	}
	return rows
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// relative says how far a duration is, in the largest unit that fits.
func relative(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	if neg {
		return s + " ago"
	}
	return "in " + s
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12] + "…"
	}
	return d
}

// crashText says what connhost does with a call of the operation's
// recovery policy when a crash leaves its outcome unknown.
func crashText(policy string) string {
	switch manifests.Policy(policy) {
	case manifests.PolicyIdempotentRetry:
		return "sent again with the same idempotency key; the provider keeps it to one effect"
	case manifests.PolicyReconcile:
		return "the connector asks the provider whether it took effect, and settles it from the answer"
	case manifests.PolicyManual:
		return "it becomes recovery_required and waits for an operator"
	}
	return "recovery policy " + policy
}

func (c *console) home(r *http.Request, s session, v *view) (string, int) {
	return c.approvals(r, s, v)
}

// list returns the executions f selects within s's namespaces, as the
// API's GET /v1/executions lists them.
func (c *console) list(ctx context.Context, s session, f ledger.Filter) ([]httpapi.Execution, error) {
	recs, err := c.listRecords(ctx, s, f)
	if err != nil {
		return nil, err
	}
	return httpapi.NewListResponse(recs, f).Executions, nil
}

// listRecords returns the records f selects within s's namespaces.
func (c *console) listRecords(ctx context.Context, s session, f ledger.Filter) ([]ledger.Record, error) {
	if len(s.principal.Namespaces) > 0 {
		if f.Namespace != "" && !slices.Contains(s.principal.Namespaces, f.Namespace) {
			return nil, &namespaceRefusal{detail: fmt.Sprintf("principal %q acts in namespace %s, not %q: search without namespace for all of its executions",
				s.principal.Name, quoteList(s.principal.Namespaces), f.Namespace)}
		}
		f.Namespaces = s.principal.Namespaces
	}
	return c.opts.Executor.Ledger().List(ctx, f)
}

// namespaceRefusal is a search naming a namespace outside the principal's,
// refused as the API refuses it (403 namespace_forbidden).
type namespaceRefusal struct{ detail string }

func (e *namespaceRefusal) Error() string  { return "console: " + e.detail }
func (e *namespaceRefusal) Unwrap() error  { return host.ErrNamespaceForbidden }
func (e *namespaceRefusal) Detail() string { return e.detail }

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// allOf lists every execution in state, within s's namespaces.
func (c *console) allOf(ctx context.Context, s session, state ledger.State) ([]httpapi.Execution, error) {
	f, err := httpapi.ParseFilter(string(state), "", "", "", fmt.Sprint(httpapi.MaxListLimit))
	if err != nil {
		return nil, err
	}
	return c.list(ctx, s, f)
}

// The inbox's page: how many calls one page shows, and how much of each
// it shows inline. A call folded here is approved from its own page,
// which shows it whole.
const (
	// inboxPage is how many calls a page of the inbox lists.
	inboxPage = 50
	// foldValue is the longest value a card shows whole; a longer one
	// shows its first foldKeep bytes.
	foldValue, foldKeep = 1024, 512
	// foldFields is how many fields a card shows (review fields first).
	foldFields = 40
)

// pending is one call of the inbox: the execution and what its reviewer
// is shown.
type pending struct {
	httpapi.Execution
	View    host.ApprovalView
	ViewErr string
	// Fields are View.Fields as the card shows them: at most foldFields,
	// each value at most foldValue bytes.
	Fields []shownField
	// Folded: some of the call is not on the card (HiddenFields fields,
	// or a value cut), so it is approved from its own page.
	Folded       bool
	HiddenFields int
	// Group, on a page grouped by session, heads the first call of each
	// session.
	Group *sessionGroup
}

// shownField is an argument as a card shows it: Cut is how many bytes of
// its value are not shown.
type shownField struct {
	host.ArgField
	Cut int
}

// inboxData is the Approvals page.
type inboxData struct {
	Calls []pending
	// Total is how many calls await approval within the page's
	// namespaces, counted from the ledger's approval index.
	Total int
	// From is the number of the page's first call in the listing (1 on
	// the first page), when known; Next continues the listing.
	From, To int
	Filter   listFilter
	Next     string
	Paged    bool
	// Scanned is how many waiting calls a filtered page read to find its
	// calls; Budget: it stopped at maxScan before the listing's end.
	Scanned int
	Budget  bool
	// Matching is how many calls the filter kept, on an ordered page
	// (listFilter.Ordered), which reads them all before sorting.
	Matching int
	// NoAmount is how many calls read were left out for having no amount
	// while the filter has an amount range.
	NoAmount int
	// PollURL is what the page's script asks how many calls began to
	// wait since the page was read (newCalls).
	PollURL string
	// CardsURL, on the first page only, is where the page's script reads
	// the cards of the calls that began to wait since the page was read
	// and match its filter (newCards), to show them without a reload.
	CardsURL string
}

// maxScan bounds the waiting calls one filtered page reads: a filter that
// matches rarely pages on from where the scan stopped. (A variable only so
// that a test can make the bound a few calls.)
var maxScan = 20000

// fold returns the card's fields of v.
func fold(v host.ApprovalView) (fields []shownField, hidden int, folded bool) {
	for i, f := range v.Fields {
		if i == foldFields {
			return fields, len(v.Fields) - i, true
		}
		sf := shownField{ArgField: f}
		if len(f.Value) > foldValue {
			keep := foldKeep
			for keep > 0 && !utf8.RuneStart(f.Value[keep]) {
				keep--
			}
			sf.Value, sf.Cut = f.Value[:keep], len(f.Value)-keep
			folded = true
		}
		fields = append(fields, sf)
	}
	return fields, 0, folded
}

// approvals is the inbox: the calls awaiting approval within the
// principal's namespaces (or the one the namespace parameter names), the
// soonest to expire first across all of them, a page at a time, under a
// count of them all. A filter (listFilter) reads the listing in pages and
// keeps what matches, at most maxScan calls a page; another order, or
// grouping by session, reads every waiting call (at most maxScan) and
// sorts what the filter keeps.
func (c *console) approvals(r *http.Request, s session, v *view) (string, int) {
	v.Title, v.Nav = "Approvals", "approvals"
	ctx := scoped(r.Context(), s.principal)
	q := r.URL.Query()
	after := q.Get("after")
	filter, ferr := parseListFilter(q, "approvals")
	d := &inboxData{Filter: filter, Paged: after != ""}
	poll := url.Values{"since": {fmt.Sprint(c.opts.Now().UnixNano())}}
	if d.Filter.Namespace != "" {
		poll.Set("namespace", d.Filter.Namespace)
	}
	d.PollURL = Prefix + "approvals/new?" + poll.Encode()
	if !d.Paged && ferr == nil {
		// Only the first page takes new calls in: a later page's calls
		// follow those of the pages before it. They are read under the
		// page's whole filter.
		cards := d.Filter.values("")
		cards.Set("since", poll.Get("since"))
		d.CardsURL = Prefix + "approvals/new/cards?" + cards.Encode()
	}
	v.Data = d
	v.Back = Prefix + "approvals" + string(d.Filter.Query(after))
	if ferr != nil {
		v.Notes = append(v.Notes, note{Error: true, Text: ferr.Error()})
		return "approvals", http.StatusBadRequest
	}
	ordered := d.Filter.Ordered()
	limit := inboxPage
	if d.Filter.narrows() || ordered {
		limit = httpapi.MaxListLimit
	}
	listAfter := after
	if ordered {
		listAfter = ""
	}
	f, err := httpapi.ParseFilter(string(ledger.StateAwaitingApproval), "", d.Filter.Namespace, listAfter, fmt.Sprint(limit))
	if err == nil {
		err = httpapi.SetOrder(&f, httpapi.OrderExpiry)
	}
	if err != nil {
		v.Notes = append(v.Notes, note{Error: true, Text: err.Error()})
		return "approvals", http.StatusBadRequest
	}
	if len(s.principal.Namespaces) > 0 {
		if f.Namespace != "" && !slices.Contains(s.principal.Namespaces, f.Namespace) {
			v.Notes = append(v.Notes, note{Error: true, Text: fmt.Sprintf("principal %q acts in namespaces %s, not %q",
				s.principal.Name, strings.Join(s.principal.Namespaces, ", "), f.Namespace)})
			return "approvals", http.StatusForbidden
		}
		f.Namespaces = s.principal.Namespaces
	}
	led := c.opts.Executor.Ledger()
	if d.Total, _, err = httpapi.CountAwaiting(ctx, led, f); err != nil {
		v.Notes = append(v.Notes, c.problem(r, err))
		return "approvals", http.StatusOK
	}
	var amount amountFunc
	if d.Filter.amounts() {
		amount = amountsOf(c.opts.Executor)
	}
	var recs []ledger.Record
	for {
		page, err := led.List(ctx, f)
		if err != nil {
			v.Notes = append(v.Notes, c.problem(r, err))
			return "approvals", http.StatusOK
		}
		for _, rec := range page {
			d.Scanned++
			keep, noAmount := d.Filter.matches(rec, amount)
			if noAmount {
				d.NoAmount++
			}
			if keep {
				recs = append(recs, rec)
			}
			if ordered {
				if d.Scanned == maxScan {
					d.Budget = true
					break
				}
				continue
			}
			if len(recs) == inboxPage || d.Scanned == maxScan {
				d.Next = httpapi.ExpiryCursor(rec)
				d.Budget = len(recs) < inboxPage
				break
			}
		}
		if d.Next != "" || d.Budget || len(page) < f.Limit {
			break
		}
		f.After = httpapi.ExpiryCursor(page[len(page)-1])
		if err := httpapi.SetOrder(&f, httpapi.OrderExpiry); err != nil {
			v.Notes = append(v.Notes, c.problem(r, err))
			return "approvals", http.StatusOK
		}
	}
	var heads []*sessionGroup
	if ordered {
		d.Matching = len(recs)
		if recs, d.From, heads, d.Next, err = c.ordered(ctx, d.Filter, recs, after, inboxPage); err != nil {
			v.Notes = append(v.Notes, note{Error: true, Text: err.Error()})
			return "approvals", http.StatusBadRequest
		}
	} else if !d.Paged {
		d.From = 1
	}
	if d.From > 0 {
		d.To = d.From + len(recs) - 1
	}
	for i, rec := range recs {
		p := c.pendingOf(ctx, rec)
		if heads != nil {
			p.Group = heads[i]
		}
		d.Calls = append(d.Calls, p)
	}
	return "approvals", http.StatusOK
}

// pendingOf is rec as the inbox shows it.
func (c *console) pendingOf(ctx context.Context, rec ledger.Record) pending {
	p := pending{Execution: httpapi.Execution{Result: host.ResultOf(rec)}}
	var err error
	if rec.Approval == nil {
		p.ViewErr, p.Folded = "no approval request is recorded for this call", true
	} else if p.View, err = c.opts.Executor.ApprovalView(ctx, rec.Approval.ID); err != nil {
		p.ViewErr = err.Error()
		p.Folded = true
	}
	var folded bool
	p.Fields, p.HiddenFields, folded = fold(p.View)
	p.Folded = p.Folded || folded
	return p
}

// maxNew bounds the calls newCalls counts: more are "maxNew or more".
const maxNew = 100

// newCalls answers the inbox's script (static/live.js): how many calls
// within the principal's namespaces (or the namespace parameter's) began
// to wait for approval after since (unix nanoseconds), up to maxNew, and
// how many wait in all. It reads the ledger's newest waiting calls and
// the approval index only, so polling it stays cheap however many wait.
func (c *console) newCalls(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	s, err := c.current(w, r)
	if errors.Is(err, errSignedOut) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"sign in first"}`))
		return
	}
	if err != nil {
		c.opts.Logger.ErrorContext(r.Context(), "console: session not checked", "path", r.URL.Path, "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	q := r.URL.Query()
	since, err := strconv.ParseInt(q.Get("since"), 10, 64)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"since: want unix nanoseconds"}`))
		return
	}
	ctx := scoped(r.Context(), s.principal)
	f, err := httpapi.ParseFilter(string(ledger.StateAwaitingApproval), "", strings.TrimSpace(q.Get("namespace")), "", fmt.Sprint(maxNew))
	var out struct {
		New   int  `json:"new"`
		More  bool `json:"more"`
		Total int  `json:"total"`
	}
	var recs []ledger.Record
	if err == nil {
		recs, err = c.listRecords(ctx, s, f)
	}
	if err == nil {
		if len(s.principal.Namespaces) > 0 {
			f.Namespaces = s.principal.Namespaces
		}
		out.Total, _, err = httpapi.CountAwaiting(ctx, c.opts.Executor.Ledger(), f)
	}
	if err != nil {
		p := httpapi.ProblemOf(err, host.Result{})
		w.WriteHeader(p.Status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": p.Detail, "code": string(p.Code)})
		return
	}
	for _, rec := range recs {
		if rec.CreatedAt.UnixNano() <= since {
			break
		}
		out.New++
	}
	out.More = out.New == maxNew
	_ = json.NewEncoder(w).Encode(out)
}

// newCards answers the first inbox page's script (static/live.js) with
// the cards of the calls that began to wait for approval after since
// (unix nanoseconds), newest first, at most maxNew, that the page's filter
// (tool, session, namespace) keeps, within the principal's namespaces. It
// renders them with the Approvals page's own template, so a card the
// script inserts is the card a reload shows: its fields, its forms (for a
// principal who may decide) and the page's CSRF token. The script takes
// the cards (section.card.approval) and, when the page has none, the
// bulk-reject form from the answer.
func (c *console) newCards(w http.ResponseWriter, r *http.Request) {
	s, err := c.current(w, r)
	if errors.Is(err, errSignedOut) {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	if err != nil {
		c.opts.Logger.ErrorContext(r.Context(), "console: session not checked", "path", r.URL.Path, "err", err)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	since, err := strconv.ParseInt(q.Get("since"), 10, 64)
	if err != nil {
		http.Error(w, "since: want unix nanoseconds", http.StatusBadRequest)
		return
	}
	v := &view{Principal: s.principal, Anonymous: c.anonymous(), Dev: c.opts.Dev,
		CanDecide: s.principal.Has(httpapi.RoleApprover),
		CanSettle: s.principal.Has(httpapi.RoleApprover, httpapi.RoleOperator),
		CSRF:      s.csrf}
	filter, err := parseListFilter(q, "approvals")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d := &inboxData{Filter: filter}
	v.Data, v.Back = d, Prefix+"approvals"+string(d.Filter.Query(""))
	var amount amountFunc
	if d.Filter.amounts() {
		amount = amountsOf(c.opts.Executor)
	}
	ctx := scoped(r.Context(), s.principal)
	f, err := httpapi.ParseFilter(string(ledger.StateAwaitingApproval), "", d.Filter.Namespace, "", fmt.Sprint(maxNew))
	var recs []ledger.Record
	if err == nil {
		recs, err = c.listRecords(ctx, s, f)
	}
	if err != nil {
		p := httpapi.ProblemOf(err, host.Result{})
		http.Error(w, p.Detail, p.Status)
		return
	}
	for _, rec := range recs {
		if rec.CreatedAt.UnixNano() <= since {
			break
		}
		if keep, _ := d.Filter.matches(rec, amount); keep {
			d.Calls = append(d.Calls, c.pendingOf(ctx, rec))
		}
	}
	var b strings.Builder
	if err := c.pages["approvals"].ExecuteTemplate(&b, "content", v); err != nil {
		c.opts.Logger.Error("console: render", "page", "approvals/new/cards", "err", err)
		http.Error(w, "console: the cards could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// find sends the browser to the execution an execution id or approval id
// names, within the principal's namespaces (a call awaiting approval to
// its decision), or back to the inbox saying none does.
func (c *console) find(w http.ResponseWriter, r *http.Request) {
	s, err := c.current(w, r)
	if errors.Is(err, errSignedOut) {
		http.Redirect(w, r, Prefix+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	c.noteAccess(r, s)
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	exec := id
	if e, ok := ledger.ExecutionIDOfApproval(id); ok {
		exec = e
	}
	rec, _, err := c.opts.Executor.Get(scoped(r.Context(), s.principal), exec)
	if err != nil || id == "" {
		text := "give an execution id (ex_…) or an approval id (ap_…)"
		if id != "" {
			text = fmt.Sprintf("no execution or approval %q", id)
			if !errors.Is(err, host.ErrNotFound) {
				text = c.problem(r, err).Text
			}
		}
		c.addNote(w, r, s, note{Error: true, Text: text})
		http.Redirect(w, r, Prefix+"approvals", http.StatusSeeOther)
		return
	}
	to := Prefix + "executions/" + rec.ID
	if rec.State == ledger.StateAwaitingApproval {
		to += "#decide"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (c *console) approve(w http.ResponseWriter, r *http.Request, s session) (string, note) {
	return c.decide(r, s, true)
}

func (c *console) reject(w http.ResponseWriter, r *http.Request, s session) (string, note) {
	return c.decide(r, s, false)
}

// decide approves or rejects, as POST /v1/approvals/{id}/approve and
// /reject do: the executor's Approve or Reject, recorded as the signed-in
// principal, with the digest of the view the reviewer was shown.
func (c *console) decide(r *http.Request, s session, approve bool) (string, note) {
	id := r.PathValue("id")
	d := host.Decision{By: s.principal.Name, ArgsDigest: r.PostForm.Get("digest"), Reason: strings.TrimSpace(r.PostForm.Get("reason"))}
	ctx := scoped(r.Context(), s.principal)
	back := backToList(r.PostForm.Get("back"))
	var (
		res host.Result
		err error
	)
	verb := "approved"
	if approve {
		if d.ArgsDigest == "" {
			return back, note{Error: true, Text: "approve " + id + ": the form names no digest; reload the inbox"}
		}
		res, err = c.opts.Executor.Approve(ctx, id, d)
	} else {
		verb = "rejected"
		res, err = c.opts.Executor.Reject(ctx, id, d)
	}
	if err != nil {
		n := c.problem(r, err)
		n.Text = id + ": " + n.Text
		if ex, ok := ledger.ExecutionIDOfApproval(id); ok {
			n.Link, n.LinkText = Prefix+"executions/"+ex, "the call"
		}
		return back, n
	}
	text := fmt.Sprintf("%s %s (%s) as %s: status %s, state %s", verb, id, res.Tool, s.principal.Name, res.Status, res.State)
	if approve && res.Status == host.StatusPending {
		text += "; the call runs when its runtime sends it again (the same ids and arguments)"
	}
	return back, note{Text: text, Link: Prefix + "executions/" + res.ExecutionID, LinkText: "the call's page"}
}

// rejectMany rejects every approval the form selects (id, at most
// inboxPage) with one reason, each as POST /v1/approvals/{id}/reject
// does, and says how many were rejected and which could not be.
func (c *console) rejectMany(w http.ResponseWriter, r *http.Request, s session) (string, note) {
	back := backToList(r.PostForm.Get("back"))
	ids := slices.Compact(slices.Sorted(slices.Values(r.PostForm["id"])))
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	switch {
	case len(ids) == 0:
		return back, note{Error: true, Text: "select the calls to reject (the box beside each call's tool)"}
	case len(ids) > inboxPage:
		return back, note{Error: true, Text: fmt.Sprintf("%d calls selected: reject at most %d at once", len(ids), inboxPage)}
	case reason == "":
		return back, note{Error: true, Text: "rejecting several calls needs a reason"}
	}
	ctx := scoped(r.Context(), s.principal)
	var done, failed []string
	for _, id := range ids {
		if _, err := c.opts.Executor.Reject(ctx, id, host.Decision{By: s.principal.Name, Reason: reason}); err != nil {
			failed = append(failed, id+": "+c.problem(r, err).Text)
			continue
		}
		done = append(done, id)
	}
	text := fmt.Sprintf("rejected %d of %d calls as %s", len(done), len(ids), s.principal.Name)
	if len(done) > 0 {
		text += ": " + strings.Join(done, ", ")
	}
	if len(failed) > 0 {
		text += "; not rejected: " + strings.Join(failed, "; ")
	}
	return back, note{Error: len(failed) > 0, Text: text}
}

// backToList returns the inbox page a decision returns to: the form's
// back (the inbox as filtered and paged) when it is one, else the inbox.
func backToList(back string) string { return backTo(back, "approvals") }

// backTo returns the form's back when it is the console's page (a list
// as filtered and paged), else that page unfiltered.
func backTo(back, page string) string {
	if back == Prefix+page || strings.HasPrefix(back, Prefix+page+"?") {
		if safeNext(back) == back {
			return back
		}
	}
	return Prefix + page
}

// problem is the note of an executor error: the API's problem detail.
// A request the principal may not make is logged at WARN, as the API's
// refusals are; only what the API answers as internal or unavailable is
// an ERROR.
func (c *console) problem(r *http.Request, err error) note {
	p := httpapi.ProblemOf(err, host.Result{})
	switch p.Code {
	case httpapi.CodeInternal, httpapi.CodeUnavailable:
		c.opts.Logger.ErrorContext(r.Context(), "console: request failed", "path", r.URL.Path, "err", err)
	case httpapi.CodeNamespaceForbidden:
		c.opts.Logger.WarnContext(r.Context(), "console: refused", "method", r.Method, "path", r.URL.Path, "code", p.Code, "why", p.Detail)
	}
	text := p.Detail
	if text == "" {
		text = p.Title
	}
	return note{Error: true, Text: fmt.Sprintf("%s (%s)", text, p.Code)}
}

// pageStatus is the status of a page that could not show what was asked
// for err: the API's status for a refusal (4xx), else 200 with the note.
func pageStatus(err error) int {
	if p := httpapi.ProblemOf(err, host.Result{}); p.Status >= 400 && p.Status < 500 {
		return p.Status
	}
	return http.StatusOK
}

// uncertain is one call of the recovery queue, with its trail.
type uncertain struct {
	httpapi.Execution
	// Stopped is why recovery stopped: the evidence and reason of the
	// event that made it recovery_required.
	Stopped ledger.Event
	// Group, on a page grouped by session, heads the first call of each
	// session.
	Group *sessionGroup
	// Provider is where to look for the call at the provider (nil: its
	// manifest says nowhere).
	Provider *providerLink
}

// fencedSession is a session its recovery_required calls fence.
type fencedSession struct {
	Namespace, SessionID string
	Calls                []string
}

type recoveryData struct {
	Calls  []uncertain
	Fenced []fencedSession
	// MoreFenced is how many fenced sessions are not listed.
	MoreFenced int
	// Total is how many calls are recovery_required within the
	// principal's namespaces; Matching, how many of them the filter keeps.
	// Capped: there are more than maxScan, and the page lists the newest
	// maxScan only.
	Total, Matching int
	Capped          bool
	// NoAmount is how many calls were left out for having no amount
	// while the filter has an amount range.
	NoAmount int
	// From is the number of the page's first call; Next continues the
	// listing (listFilter.cursor).
	From, To int
	Next     string
	Paged    bool
	Filter   listFilter
}

// recoveryPage is how many calls a page of the recovery queue shows, and
// maxFenced how many fenced sessions it lists.
const recoveryPage, maxFenced = 50, 50

// recovery is the queue of recovery_required calls within the
// principal's namespaces that the filter keeps, least recently changed
// first (or as the filter orders and groups them), a page at a time,
// under a count of them all and the sessions they fence. The queue's
// records are read whole (they are few: each stops a session), at most
// maxScan; only a page's trails are.
func (c *console) recovery(r *http.Request, s session, v *view) (string, int) {
	v.Title, v.Nav = "Recovery", "recovery"
	ctx := scoped(r.Context(), s.principal)
	q := r.URL.Query()
	after := q.Get("after")
	filter, ferr := parseListFilter(q, "recovery")
	d := &recoveryData{Filter: filter, Paged: after != ""}
	v.Data = d
	v.Back = Prefix + "recovery" + string(d.Filter.Query(after))
	if ferr != nil {
		v.Notes = append(v.Notes, note{Error: true, Text: ferr.Error()})
		return "recovery", http.StatusBadRequest
	}
	f, err := httpapi.ParseFilter(string(ledger.StateRecoveryRequired), "", d.Filter.Namespace, "", fmt.Sprint(httpapi.MaxListLimit))
	if err != nil {
		v.Notes = append(v.Notes, note{Error: true, Text: err.Error()})
		return "recovery", http.StatusBadRequest
	}
	var all []ledger.Record
	for {
		execs, err := c.listRecords(ctx, s, f)
		if err != nil {
			v.Notes = append(v.Notes, c.problem(r, err))
			return "recovery", pageStatus(err)
		}
		all = append(all, execs...)
		if len(execs) < f.Limit {
			break
		}
		if len(all) >= maxScan {
			d.Capped = true
			break
		}
		f.After = execs[len(execs)-1].ID
	}
	d.Total = len(all)
	var amount amountFunc
	if d.Filter.amounts() {
		amount = amountsOf(c.opts.Executor)
	}
	// Every recovery_required call of a session fences it, whether the
	// filter keeps it or not: a fenced session the page names lists them
	// all, so that resolving the calls listed frees it.
	fencing := map[[2]string][]string{}
	for _, rec := range all {
		k := [2]string{rec.Namespace, rec.SessionID}
		fencing[k] = append(fencing[k], rec.ID)
	}
	kept := all[:0]
	for _, rec := range all {
		keep, noAmount := d.Filter.matches(rec, amount)
		if noAmount {
			d.NoAmount++
		}
		if keep {
			kept = append(kept, rec)
		}
	}
	d.Matching = len(kept)
	page, from, heads, next, err := c.ordered(ctx, d.Filter, kept, after, recoveryPage)
	if err != nil {
		v.Notes = append(v.Notes, note{Error: true, Text: err.Error()})
		return "recovery", http.StatusBadRequest
	}
	listed := map[[2]string]bool{}
	for _, rec := range kept {
		k := [2]string{rec.Namespace, rec.SessionID}
		if listed[k] {
			continue
		}
		listed[k] = true
		if len(d.Fenced) == maxFenced {
			d.MoreFenced++
			continue
		}
		d.Fenced = append(d.Fenced, fencedSession{Namespace: rec.Namespace, SessionID: rec.SessionID, Calls: fencing[k]})
	}
	d.From, d.To, d.Next = from, from+len(page)-1, next
	for i, rec := range page {
		rec, evs, err := c.opts.Executor.Get(ctx, rec.ID)
		if err != nil {
			v.Notes = append(v.Notes, c.problem(r, err))
			continue
		}
		u := uncertain{Execution: httpapi.NewExecution(rec, evs), Provider: c.providerLink(rec)}
		if heads != nil {
			u.Group = heads[i]
		}
		for _, ev := range evs {
			if ev.To == ledger.StateRecoveryRequired {
				u.Stopped = ev
			}
		}
		d.Calls = append(d.Calls, u)
	}
	return "recovery", http.StatusOK
}

// resolve settles a recovery_required call, as POST
// /v1/executions/{id}/resolve does: the executor's Resolve, recorded as
// the signed-in principal. The form's outcome is applied (with the
// receipt and, optionally, the result), retry or abandon.
func (c *console) resolve(w http.ResponseWriter, r *http.Request, s session) (string, note) {
	id := r.PathValue("id")
	back := backTo(r.PostForm.Get("back"), "recovery")
	res := host.Resolution{By: s.principal.Name, Reason: strings.TrimSpace(r.PostForm.Get("reason")),
		Receipt: strings.TrimSpace(r.PostForm.Get("receipt"))}
	switch r.PostForm.Get("outcome") {
	case "applied":
		res.Applied = true
		if raw := strings.TrimSpace(r.PostForm.Get("result")); raw != "" {
			if !json.Valid([]byte(raw)) {
				return back, note{Error: true, Text: id + ": the result is not JSON; leave it empty or paste the provider's object"}
			}
			res.Result = json.RawMessage(raw)
		}
	case "retry":
		res.Retry = true
	case "abandon":
	default:
		return back, note{Error: true, Text: id + ": choose what happened: applied, not applied (retry) or not applied (abandon)"}
	}
	if res.Reason == "" {
		return back, note{Error: true, Text: id + ": a resolution needs a reason (what you checked at the provider)"}
	}
	ctx := scoped(r.Context(), s.principal)
	out, err := c.opts.Executor.Resolve(ctx, id, res)
	if err != nil {
		n := c.problem(r, err)
		n.Text = id + ": " + n.Text
		return back, n
	}
	text := fmt.Sprintf("resolved %s as %s: status %s, state %s", id, s.principal.Name, out.Status, out.State)
	// The session is free once none of its calls is recovery_required.
	f, _ := httpapi.ParseFilter(string(ledger.StateRecoveryRequired), out.SessionID, out.Namespace, "", "1")
	if left, err := c.list(ctx, s, f); err == nil {
		if len(left) == 0 {
			text += fmt.Sprintf("; session %s (namespace %s) is no longer fenced: it takes new calls again", vis(out.SessionID), vis(out.Namespace))
		} else {
			text += fmt.Sprintf("; session %s is still fenced by other recovery_required calls", vis(out.SessionID))
		}
	}
	return Prefix + "executions/" + out.ExecutionID, note{Text: text}
}

// execFilter is the Executions page's search form.
type execFilter struct {
	State, Session, Tool, Namespace, From, To string
	// Principal is who made the call, decided on it or resolved it,
	// named whole ("": anyone).
	Principal string
	// Exact: Session is a whole session id, looked up in the ledger's
	// index (every execution of the session, however old); else a part
	// of one, matched among the newest executions read.
	Exact   bool
	Refresh bool
}

type executionsData struct {
	Filter execFilter
	States []string
	Items  []httpapi.Execution
	Next   string
	// Scanned is how many executions the search read (newest first).
	Scanned int
}

const timeForm = "2006-01-02T15:04"

func (c *console) executions(r *http.Request, s session, v *view) (string, int) {
	v.Title, v.Nav = "Executions", "executions"
	q := r.URL.Query()
	d := executionsData{Filter: execFilter{State: q.Get("state"), Session: strings.TrimSpace(q.Get("session")), Tool: strings.TrimSpace(q.Get("tool")),
		Namespace: q.Get("namespace"), From: q.Get("from"), To: q.Get("to"), Refresh: q.Get("refresh") != "", Exact: q.Get("exact") != "",
		Principal: strings.TrimSpace(q.Get("principal"))}}
	for _, st := range []ledger.State{ledger.StateAwaitingApproval, ledger.StateApproved, ledger.StateDispatched, ledger.StateRetryWait,
		ledger.StateRecoveryRequired, ledger.StateSucceeded, ledger.StateFailed, ledger.StateRejected,
		ledger.StateExpired, ledger.StateAbandoned, ledger.StateCancelled} {
		d.States = append(d.States, string(st))
	}
	v.Data = &d
	if d.Filter.Refresh {
		v.Refresh = 5
	}
	var from, to time.Time
	for _, t := range []struct {
		in  string
		out *time.Time
	}{{d.Filter.From, &from}, {d.Filter.To, &to}} {
		if t.in == "" {
			continue
		}
		p, err := time.Parse(timeForm, t.in)
		if err != nil {
			v.Notes = append(v.Notes, note{Error: true, Text: fmt.Sprintf("time %q: want YYYY-MM-DDTHH:MM (UTC)", t.in)})
			return "executions", http.StatusBadRequest
		}
		*t.out = p
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		// As Approvals and Recovery refuse it (parseListFilter), rather
		// than list nothing as if no call were made then.
		v.Notes = append(v.Notes, note{Error: true, Text: fmt.Sprintf("from %s is not before to %s: no call can match", d.Filter.From, d.Filter.To)})
		return "executions", http.StatusBadRequest
	}
	exact, part := "", d.Filter.Session
	if d.Filter.Exact {
		exact, part = d.Filter.Session, ""
	}
	f, err := httpapi.ParseFilter(d.Filter.State, exact, d.Filter.Namespace, q.Get("after"), fmt.Sprint(httpapi.MaxListLimit))
	if err != nil {
		v.Notes = append(v.Notes, note{Error: true, Text: err.Error()})
		return "executions", http.StatusBadRequest
	}
	ctx := scoped(r.Context(), s.principal)
	const show = 100
	// Tool, session (both substrings), principal and time are not ledger filters:
	// pages of the listing are read newest first and filtered here, until
	// a page of results or the time range's start.
	for pages := 0; pages < 10; pages++ {
		items, err := c.list(ctx, s, f)
		if err != nil {
			v.Notes = append(v.Notes, c.problem(r, err))
			return "executions", pageStatus(err)
		}
		done := len(items) < f.Limit
		for _, e := range items {
			d.Scanned++
			if !from.IsZero() && e.CreatedAt.Before(from) {
				done = true
				break
			}
			if strings.Contains(e.Tool, d.Filter.Tool) && strings.Contains(e.SessionID, part) && (to.IsZero() || e.CreatedAt.Before(to)) &&
				(d.Filter.Principal == "" || actedOn(d.Filter.Principal, e.RequestedBy, e.Approval, e.Resolution)) {
				d.Items = append(d.Items, e)
			}
			if len(d.Items) == show {
				d.Next = e.ExecutionID
				done = true
				break
			}
		}
		if done || len(items) == 0 {
			break
		}
		f.After = items[len(items)-1].ExecutionID
		d.Next = f.After
	}
	if len(d.Items) < show && d.Scanned%httpapi.MaxListLimit != 0 {
		d.Next = ""
	}
	return "executions", http.StatusOK
}

type executionData struct {
	httpapi.Execution
	View *host.ApprovalView
	// Fields are the arguments as argview shows them, in path order, for
	// an execution without an approval view.
	Fields  []host.ArgField
	Stopped *ledger.Event
	// Provider is where to look for a recovery_required call at its
	// provider (nil: elsewhere, or its manifest says nowhere).
	Provider *providerLink
	Fenced   bool
	Refresh  bool
}

func (c *console) execution(r *http.Request, s session, v *view) (string, int) {
	v.Title, v.Nav = "Execution", "executions"
	ctx := scoped(r.Context(), s.principal)
	rec, evs, err := c.opts.Executor.Get(ctx, r.PathValue("id"))
	if err != nil {
		n := c.problem(r, err)
		v.Notes = append(v.Notes, n)
		if errors.Is(err, host.ErrNotFound) {
			return "execution", http.StatusNotFound
		}
		return "execution", http.StatusOK
	}
	d := &executionData{Execution: httpapi.NewExecution(rec, evs), Refresh: r.URL.Query().Get("refresh") != ""}
	v.Title = "Execution " + rec.ID
	if d.Refresh {
		v.Refresh = 5
	}
	if d.Approval != nil {
		if av, err := c.opts.Executor.ApprovalView(ctx, d.Approval.ID); err == nil {
			d.View = &av
		}
	}
	if d.View == nil {
		if fields, _, err := host.RenderArgs(rec.Args, nil); err == nil {
			d.Fields = fields
		}
	}
	for i := range evs {
		if evs[i].To == ledger.StateRecoveryRequired {
			d.Stopped = &evs[i]
		}
	}
	if d.State == ledger.StateRecoveryRequired {
		d.Fenced = true
		d.Provider = c.providerLink(rec)
	} else {
		f, _ := httpapi.ParseFilter(string(ledger.StateRecoveryRequired), d.SessionID, d.Namespace, "", "1")
		if left, err := c.list(ctx, s, f); err == nil && len(left) > 0 {
			d.Fenced = true
		}
	}
	v.Data = d
	return "execution", http.StatusOK
}

// connector is one loaded connector as the Connectors page shows it.
type connector struct {
	Name, Version, Manifest, ManifestDigest, Module, ModuleDigest string
	Operations                                                    []string
	Signoff                                                       *audit.SignoffStatus
	Findings                                                      []audit.Finding
}

type connectorsData struct {
	Connectors []connector
	Audited    bool
	Summary    audit.Summary
}

// audit returns the report of Options.Audit, computed once.
func (c *console) audit(ctx context.Context) *audit.Report {
	if c.opts.Audit == nil {
		return nil
	}
	c.auditOnce.Do(func() {
		r := c.opts.Audit(context.WithoutCancel(ctx))
		c.report = &r
	})
	return c.report
}

func (c *console) connectors(r *http.Request, s session, v *view) (string, int) {
	v.Title, v.Nav = "Connectors", "connectors"
	d := connectorsData{}
	rep := c.audit(r.Context())
	for _, m := range c.opts.Executor.Manifests() {
		k := connector{Name: m.Connector.Name, Version: m.Connector.Version, Manifest: m.Path, ManifestDigest: m.Digest,
			Module: m.Connector.Module, ModuleDigest: m.Connector.SHA256}
		for _, op := range m.Operations {
			k.Operations = append(k.Operations, op.Name)
		}
		if rep != nil {
			for i := range rep.Connectors {
				if rc := &rep.Connectors[i]; rc.Name == k.Name {
					k.Signoff = &rc.Signoff
					if rc.Module.ActualSHA256 != "" {
						k.ModuleDigest = rc.Module.ActualSHA256
					}
				}
			}
			for _, f := range rep.Findings {
				if f.Connector == k.Name {
					k.Findings = append(k.Findings, f)
				}
			}
		}
		d.Connectors = append(d.Connectors, k)
	}
	slices.SortFunc(d.Connectors, func(a, b connector) int { return cmp.Compare(a.Name, b.Name) })
	if rep != nil {
		d.Audited, d.Summary = true, rep.Summary()
	}
	v.Data = d
	return "connectors", http.StatusOK
}

// auditHTML serves the audit's HTML report (audit.WriteHTML, what
// `connhost audit --html` writes) to a signed-in principal. Its one
// inline stylesheet is allowed by its hash.
func (c *console) auditHTML(w http.ResponseWriter, r *http.Request) {
	if _, err := c.current(w, r); errors.Is(err, errSignedOut) {
		http.Redirect(w, r, Prefix+"signin?next="+Prefix+"connectors/audit", http.StatusSeeOther)
		return
	} else if err != nil {
		c.unavailable(w, r, err)
		return
	}
	rep := c.audit(r.Context())
	if rep == nil {
		http.Error(w, "this server has no audit of its connectors", http.StatusNotFound)
		return
	}
	var b bytes.Buffer
	if err := audit.WriteHTML(&b, *rep); err != nil {
		c.opts.Logger.Error("console: audit report", "err", err)
		http.Error(w, "console: the audit report could not be written", http.StatusInternalServerError)
		return
	}
	policy := "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
	if css, ok := inlineStyle(b.Bytes()); ok {
		sum := sha256.Sum256(css)
		policy += "; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	w.Header().Set("Content-Security-Policy", policy)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// inlineStyle returns the text of page's one <style> element.
func inlineStyle(page []byte) ([]byte, bool) {
	_, rest, ok := bytes.Cut(page, []byte("<style>"))
	if !ok {
		return nil, false
	}
	css, _, ok := bytes.Cut(rest, []byte("</style>"))
	return css, ok
}
