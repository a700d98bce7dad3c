package manifests

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// The placeholders of Provider.Search.
const (
	searchExecutionID = "{execution_id}"
	searchKey         = "{key}"
)

// checkSearch reports why s is no provider.search template: it must be
// an absolute http or https URL with a host once its placeholders are
// filled, name no placeholder but {execution_id} and {key}, and keep
// them out of its scheme and host (a filled value never chooses where
// the link goes).
func checkSearch(s string) error {
	if len(s) > 2048 {
		return errors.New("at most 2048 bytes")
	}
	rest := s
	for {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			break
		}
		ph := rest[i:]
		switch {
		case strings.HasPrefix(ph, searchExecutionID):
			rest = ph[len(searchExecutionID):]
		case strings.HasPrefix(ph, searchKey):
			rest = ph[len(searchKey):]
		default:
			bad := ph[:1]
			if end := strings.IndexByte(ph, '}'); ph[0] == '{' && end > 0 {
				bad = ph[:end+1]
			} else if ph[0] == '{' {
				bad = ph[:min(len(ph), 40)]
			}
			return fmt.Errorf("%q: the only placeholders are %s and %s (a brace outside them is written %%7B or %%7D)", bad, searchExecutionID, searchKey)
		}
	}
	if strings.ContainsAny(s, " \t\r\n\"<>\\`") {
		return errors.New("not a URL: it holds white space, a quote, <, >, \\ or `")
	}
	u, err := url.Parse(strings.NewReplacer(searchExecutionID, "", searchKey, "").Replace(s))
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.User != nil {
		return errors.New("want an http or https URL with a host and no user, such as https://dashboard.example.com/search?q={execution_id}")
	}
	_, rest, _ = strings.Cut(s, "://")
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	if strings.Contains(rest, "{") {
		return errors.New("a placeholder in the host would let a call's value choose the site: put it in the path or query")
	}
	return nil
}

// SearchURL fills p.Search for one call: executionID and key, each
// escaped for where it stands (the path, or the query and fragment).
// It returns "" when the manifest declares no search.
func (p Provider) SearchURL(executionID, key string) string {
	if p.Search == "" {
		return ""
	}
	q := strings.IndexAny(p.Search, "?#")
	fill := func(part string, escape func(string) string) string {
		return strings.NewReplacer(searchExecutionID, escape(executionID), searchKey, escape(key)).Replace(part)
	}
	if q < 0 {
		return fill(p.Search, url.PathEscape)
	}
	return fill(p.Search[:q], url.PathEscape) + fill(p.Search[q:], url.QueryEscape)
}
