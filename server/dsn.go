package server

import (
	"net/url"
	"regexp"
	"strings"
)

// DSNHasPassword reports whether a connection string holds a password:
// a URL's user:password@ or password= parameter, or a password= keyword.
func DSNHasPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return strings.Contains(dsn, "@") // cannot tell: assume the worst
		}
		if _, ok := u.User.Password(); ok {
			return true
		}
		for k := range u.Query() {
			if strings.EqualFold(k, "password") {
				return true
			}
		}
		return false
	}
	return dsnPasswordRE.MatchString(dsn)
}

var dsnPasswordRE = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactDSN returns a connection string fit for logs and messages: the
// password of a URL (user:password@) and of a password= parameter replaced
// by "xxxxx".
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(a connection string that does not parse; not shown)"
		}
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			}
		}
		q := u.Query()
		for k := range q {
			if strings.EqualFold(k, "password") {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsnPasswordRE.ReplaceAllString(dsn, "${1}xxxxx")
}
