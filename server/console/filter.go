package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html/template"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/argview"
	"github.com/connhost/connhost/ledger"
)

// The orders of the Approvals and Recovery pages (the sort parameter).
const (
	// sortExpiry lists the calls awaiting approval soonest expiry first
	// (Approvals' default).
	sortExpiry = "expiry"
	// sortOldest lists the calls that began waiting (Approvals) or last
	// changed (Recovery) longest ago first (Recovery's default).
	sortOldest = "oldest"
	// sortNewest is sortOldest reversed.
	sortNewest = "newest"
)

// listFilter is what the Approvals and Recovery pages narrow their
// listing to, from the page's query parameters (parseListFilter): a tool
// (or connector) and a session, each matched as a substring; a namespace,
// matched whole; a principal, who made the call or decided it; a time
// range (when a call began waiting, on Approvals; when it last changed,
// on Recovery); an amount range; and the order and grouping of the list.
type listFilter struct {
	// Page is the page the filter belongs to: "approvals" or "recovery".
	Page                                string
	Tool, Session, Namespace, Principal string
	// From and To bound the time range as given (timeForm, UTC; To
	// excluded); AmountMin and AmountMax the amount range, in major units
	// of Currency (both included). Currency (an ISO 4217 code, upper
	// case) keeps only calls whose amount is in it; an amount range needs
	// one, since amounts of different currencies do not compare.
	From, To, AmountMin, AmountMax, Currency string
	// Sort is one of sortExpiry, sortOldest and sortNewest (Approvals) or
	// sortOldest and sortNewest (Recovery); "" reads as the page's
	// default.
	Sort string
	// Group lists the calls of one session together, sessions in order of
	// namespace and id.
	Group bool

	from, to time.Time
	min, max *big.Rat
}

// maxFilterText bounds each text a filter is given: longer is refused,
// not cut.
const maxFilterText = 200

// defaultSort is a page's order when the query names none.
func defaultSort(page string) string {
	if page == "approvals" {
		return sortExpiry
	}
	return sortOldest
}

// parseListFilter reads the filter of page ("approvals" or "recovery")
// from q. Every parameter it cannot read is reported at once, each saying
// what it wants.
func parseListFilter(q url.Values, page string) (listFilter, error) {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	f := listFilter{Page: page, Tool: get("tool"), Session: get("session"), Namespace: get("namespace"), Principal: get("principal"),
		From: get("from"), To: get("to"), AmountMin: get("amount_min"), AmountMax: get("amount_max"),
		Currency: strings.ToUpper(get("currency")), Sort: get("sort")}
	var errs []string
	for _, kv := range [][2]string{{"tool", f.Tool}, {"session", f.Session}, {"namespace", f.Namespace}, {"principal", f.Principal}} {
		if len(kv[1]) > maxFilterText {
			errs = append(errs, fmt.Sprintf("%s: at most %d bytes", kv[0], maxFilterText))
		}
	}
	for _, t := range []struct {
		name, in string
		out      *time.Time
	}{{"from", f.From, &f.from}, {"to", f.To, &f.to}} {
		if t.in == "" {
			continue
		}
		p, err := time.Parse(timeForm, t.in)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %q: want YYYY-MM-DDTHH:MM (UTC)", t.name, t.in))
			continue
		}
		*t.out = p
	}
	if !f.from.IsZero() && !f.to.IsZero() && !f.from.Before(f.to) {
		errs = append(errs, fmt.Sprintf("from %s is not before to %s: no call can match", f.From, f.To))
	}
	for _, a := range []struct {
		name, in string
		out      **big.Rat
	}{{"amount from", f.AmountMin, &f.min}, {"amount to", f.AmountMax, &f.max}} {
		if a.in == "" {
			continue
		}
		r, ok := parseAmount(a.in)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s %q: want a number of the call's currency such as 250 or 99.95", a.name, a.in))
			continue
		}
		*a.out = r
	}
	switch {
	case f.Currency != "" && !currencyCode.MatchString(f.Currency):
		errs = append(errs, fmt.Sprintf("currency %q: want a three-letter code such as USD", f.Currency))
	case f.Currency == "" && (f.AmountMin != "" || f.AmountMax != ""):
		errs = append(errs, "an amount range needs a currency (such as USD): amounts of different currencies do not compare")
	}
	if f.min != nil && f.max != nil && f.min.Cmp(f.max) > 0 {
		errs = append(errs, fmt.Sprintf("amount from %s is above amount to %s: no call can match", f.AmountMin, f.AmountMax))
	}
	if f.Sort == "" {
		f.Sort = defaultSort(page)
	}
	switch {
	case f.Sort == sortOldest, f.Sort == sortNewest:
	case f.Sort == sortExpiry && page == "approvals":
	default:
		want := "oldest or newest"
		if page == "approvals" {
			want = "expiry, oldest or newest"
		}
		errs = append(errs, fmt.Sprintf("sort %q: want %s", f.Sort, want))
		f.Sort = defaultSort(page)
	}
	switch g := get("group"); g {
	case "":
	case "session":
		f.Group = true
	default:
		errs = append(errs, fmt.Sprintf("group %q: want session, or none", g))
	}
	if len(errs) > 0 {
		return f, errors.New(strings.Join(errs, "; "))
	}
	return f, nil
}

// parseAmount reads a non-negative decimal amount: at most 18 digits
// before the point and 9 after it (no sign, exponent or grouping), so
// that no text makes the comparison costly.
func parseAmount(s string) (*big.Rat, bool) {
	whole, frac, dot := strings.Cut(s, ".")
	if len(whole) == 0 || len(whole) > 18 || len(frac) > 9 || dot && frac == "" {
		return nil, false
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return nil, false
			}
		}
	}
	return new(big.Rat).SetString(s)
}

// narrows reports whether the filter holds anything the ledger's index
// does not select (all but the namespace).
func (f listFilter) narrows() bool {
	return f.Tool != "" || f.Session != "" || f.Principal != "" || !f.from.IsZero() || !f.to.IsZero() || f.amounts()
}

// amounts reports whether the filter has an amount range.
func (f listFilter) amounts() bool { return f.min != nil || f.max != nil || f.Currency != "" }

// currencyCode is what the currency filter takes.
var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// Any reports whether the filter narrows the listing at all.
func (f listFilter) Any() bool { return f.narrows() || f.Namespace != "" }

// Ordered reports whether the page's calls are sorted other than the
// ledger lists them (or grouped), which reads every call the filter
// keeps, up to maxScan, before a page is shown.
func (f listFilter) Ordered() bool { return f.Group || f.Page == "approvals" && f.Sort != sortExpiry }

// SortText says the page's order, for its heading.
func (f listFilter) SortText() string {
	var s string
	switch {
	case f.Sort == sortExpiry:
		s = "soonest expiry first"
	case f.Page == "approvals" && f.Sort == sortOldest:
		s = "longest waiting first"
	case f.Page == "approvals":
		s = "newest first"
	case f.Sort == sortOldest:
		s = "least recently changed first"
	default:
		s = "most recently changed first"
	}
	if f.Group {
		s = "by session, " + s
	}
	return s
}

// SortOptions are the orders the page offers, for its form.
func (f listFilter) SortOptions() [][2]string {
	if f.Page == "approvals" {
		return [][2]string{{sortExpiry, "soonest expiry first"}, {sortOldest, "longest waiting first"}, {sortNewest, "newest first"}}
	}
	return [][2]string{{sortOldest, "least recently changed first"}, {sortNewest, "most recently changed first"}}
}

// TimeLabel names what the time range bounds on the page.
func (f listFilter) TimeLabel() string {
	if f.Page == "approvals" {
		return "Began waiting"
	}
	return "Last changed"
}

// Query returns the filter as query parameters (for page links and the
// page a decision returns to), with after appended when not empty.
func (f listFilter) Query(after string) template.URL {
	q := f.values(after)
	if len(q) == 0 {
		return ""
	}
	return template.URL("?" + q.Encode())
}

// values returns the filter's query parameters (those that differ from
// the page's defaults), with after when not empty.
func (f listFilter) values(after string) url.Values {
	q := url.Values{}
	sort := f.Sort
	if sort == defaultSort(f.Page) {
		sort = ""
	}
	group := ""
	if f.Group {
		group = "session"
	}
	for _, kv := range [][2]string{{"tool", f.Tool}, {"session", f.Session}, {"namespace", f.Namespace}, {"principal", f.Principal},
		{"from", f.From}, {"to", f.To}, {"amount_min", f.AmountMin}, {"amount_max", f.AmountMax}, {"currency", f.Currency}, {"sort", sort}, {"group", group}, {"after", after}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return q
}

// amountFunc returns the amount of a record in its currency's major
// units, and that currency (argview.Amount under its operation's money
// fields).
type amountFunc func(ledger.Record) (*big.Rat, string, bool)

// amountsOf returns the amountFunc of the executor's loaded manifests.
func amountsOf(ex *host.Executor) amountFunc {
	specs := map[string]argview.Spec{}
	for _, m := range ex.Manifests() {
		for _, op := range m.Operations {
			var s argview.Spec
			for _, mo := range op.Money {
				s.Money = append(s.Money, argview.Money{Amount: mo.Amount, Currency: mo.Currency})
			}
			specs[m.Connector.Name+"."+op.Name] = s
		}
	}
	return func(rec ledger.Record) (*big.Rat, string, bool) {
		s, ok := specs[rec.Connector+"."+rec.Operation]
		if !ok {
			return nil, "", false
		}
		return argview.Amount(rec.Args, s)
	}
}

// when is the time the page's time range and order read of rec: when it
// began waiting for approval, or when it last changed.
func (f listFilter) when(rec ledger.Record) time.Time {
	if f.Page == "approvals" {
		if rec.Approval != nil && !rec.Approval.RequestedAt.IsZero() {
			return rec.Approval.RequestedAt
		}
		return rec.CreatedAt
	}
	return rec.UpdatedAt
}

// matches reports whether rec is one the filter keeps (namespace aside,
// which the ledger selects); noAmount, that it was left out for having
// no amount in the filter's currency.
func (f listFilter) matches(rec ledger.Record, amount amountFunc) (keep, noAmount bool) {
	if !strings.Contains(rec.Connector+"."+rec.Operation, f.Tool) || !strings.Contains(rec.SessionID, f.Session) {
		return false, false
	}
	if f.Principal != "" && !principalOf(rec, f.Principal) {
		return false, false
	}
	if at := f.when(rec); !f.from.IsZero() && at.Before(f.from) || !f.to.IsZero() && !at.Before(f.to) {
		return false, false
	}
	if f.amounts() {
		a, code, ok := amount(rec)
		if !ok || code != f.Currency {
			return false, true
		}
		if f.min != nil && a.Cmp(f.min) < 0 || f.max != nil && a.Cmp(f.max) > 0 {
			return false, false
		}
	}
	return true, false
}

// principalOf reports whether p made the call (RequestedBy), decided on
// its approval or resolved it.
func principalOf(rec ledger.Record, p string) bool {
	return actedOn(p, rec.RequestedBy, rec.Approval, rec.Resolution)
}

// actedOn reports whether p is the principal who made a call
// (requestedBy), decided on its approval or resolved it: the principal
// filter of Approvals, Recovery (a ledger.Record) and Executions (a
// host.Result) alike.
func actedOn(p, requestedBy string, a *ledger.Approval, r *ledger.Resolution) bool {
	return requestedBy == p || a != nil && a.By == p || r != nil && r.By == p
}

// position is where a call stands in an ordered page's listing: its
// group (namespace and session, when grouped), its time (listFilter.when,
// or its expiry) and its id.
type position struct {
	namespace, session string
	at                 int64
	id                 string
}

// positionOf returns rec's position under f.
func (f listFilter) positionOf(rec ledger.Record) position {
	p := position{at: f.when(rec).UnixNano(), id: rec.ID}
	if f.Sort == sortExpiry {
		due, _ := ledger.DueAt(rec)
		p.at = ledger.DueUnixNano(due)
	}
	if f.Group {
		p.namespace, p.session = rec.Namespace, rec.SessionID
	}
	return p
}

// compare orders two positions under f: by group (namespace, session),
// then by time and id, reversed for sortNewest.
func (f listFilter) compare(a, b position) int {
	if c := cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.session, b.session)); c != 0 {
		return c
	}
	c := cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id))
	if f.Sort == sortNewest {
		return -c
	}
	return c
}

// cursor is the position after rec for the next page's after parameter:
// "<unix nanoseconds>.<execution id>". A grouped listing takes rec's
// namespace and session from its record (fixed at creation).
func (f listFilter) cursor(rec ledger.Record) string {
	return strconv.FormatInt(f.positionOf(rec).at, 10) + "." + rec.ID
}

// parseCursor reads an after parameter (cursor) into a position, without
// its group.
func parseCursor(after string) (position, error) {
	n, id, ok := strings.Cut(after, ".")
	at, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || id == "" || len(id) > maxFilterText {
		return position{}, fmt.Errorf("after %q is not the next of this listing (want <unix nanoseconds>.<execution id>)", after)
	}
	return position{at: at, id: id}, nil
}

// sessionGroup is the heading above the first call of a session on a
// grouped page: the session, and how many of its calls the filter keeps.
type sessionGroup struct {
	Namespace, SessionID string
	Calls                int
	// Continued: the session's calls began on an earlier page.
	Continued bool
}

// ordered sorts recs (the calls a filter kept) under f and returns the
// page of at most n after the after parameter ("": the first page), the
// number of its first call in recs (from 1), its group headings (one per
// call, nil where none starts; nil when not grouped) and the next page's
// cursor ("" on the last page). A cursor whose call left the listing
// (decided, resolved) still marks the same place: its group is read from
// its record.
func (c *console) ordered(ctx context.Context, f listFilter, recs []ledger.Record, after string, n int) (page []ledger.Record, from int, heads []*sessionGroup, next string, err error) {
	slices.SortFunc(recs, func(a, b ledger.Record) int { return f.compare(f.positionOf(a), f.positionOf(b)) })
	start := 0
	if after != "" {
		at, err := parseCursor(after)
		if err != nil {
			return nil, 0, nil, "", err
		}
		if f.Group {
			i := slices.IndexFunc(recs, func(r ledger.Record) bool { return r.ID == at.id })
			var rec ledger.Record
			if i >= 0 {
				rec = recs[i]
			} else if rec, _, err = c.opts.Executor.Get(ctx, at.id); err != nil {
				return nil, 0, nil, "", fmt.Errorf("the call the previous page ended with, %s, cannot be read (%w): start from the first page", at.id, err)
			}
			at.namespace, at.session = rec.Namespace, rec.SessionID
		}
		start = len(recs)
		for i, rec := range recs {
			if f.compare(f.positionOf(rec), at) > 0 {
				start = i
				break
			}
		}
	}
	page = recs[start:min(len(recs), start+n)]
	if start+len(page) < len(recs) {
		next = f.cursor(page[len(page)-1])
	}
	if f.Group {
		count := map[[2]string]int{}
		for _, rec := range recs {
			count[[2]string{rec.Namespace, rec.SessionID}]++
		}
		heads = make([]*sessionGroup, len(page))
		for i, rec := range page {
			k := [2]string{rec.Namespace, rec.SessionID}
			prev := start + i - 1
			if prev >= 0 && recs[prev].Namespace == k[0] && recs[prev].SessionID == k[1] {
				if i > 0 {
					continue
				}
				heads[i] = &sessionGroup{Namespace: k[0], SessionID: k[1], Calls: count[k], Continued: true}
				continue
			}
			heads[i] = &sessionGroup{Namespace: k[0], SessionID: k[1], Calls: count[k]}
		}
	}
	return page, start + 1, heads, next, nil
}

// providerLink is where an operator looks for a call at its provider: the
// connector's provider.search filled for the call.
type providerLink struct {
	Name, URL string
}

// providerLink returns the provider search of rec's connector (nil when
// its loaded manifest declares none).
func (c *console) providerLink(rec ledger.Record) *providerLink {
	for _, m := range c.opts.Executor.Manifests() {
		if m.Connector.Name != rec.Connector || m.Provider.Search == "" {
			continue
		}
		name := m.Provider.Name
		if name == "" {
			name = rec.Connector
		}
		return &providerLink{Name: name, URL: m.Provider.SearchURL(rec.ID, rec.IdempotencyKey)}
	}
	return nil
}
