package console

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/connhost/connhost/server/httpapi"
)

// FuzzOIDCCallback feeds the OIDC callback what a browser controls: the
// flow cookie and the query. Whatever it holds, no session is issued
// (the provider here is unreachable, so no code can be exchanged), and
// the answer is a refusal page, never a panic.
func FuzzOIDCCallback(f *testing.F) {
	e := newEnvWith(f, principals, nil, false, func(co *Options, _ *httpapi.Options) {
		co.OIDC = &OIDC{Issuer: "http://127.0.0.1:1/", ClientID: "web", RedirectURL: "http://127.0.0.1/ui/oidc/callback",
			Subjects: map[string]string{"sub-rita": "rita"}}
	})
	flow := base64.RawURLEncoding.EncodeToString([]byte(`{"s":"st","n":"no","v":"ver","next":"/ui/approvals"}`))
	f.Add(flow, "st", "code", "")
	f.Add(flow, "other", "code", "")
	f.Add(flow, "st", "", "access_denied")
	f.Add("", "", "", "")
	f.Add("%%%", "st", "code", "")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"s":""}`)), "", "code", "")
	f.Fuzz(func(t *testing.T, cookie, state, code, errParam string) {
		q := url.Values{"state": {state}, "code": {code}}
		if errParam != "" {
			q.Set("error", errParam)
		}
		req := httptest.NewRequest("GET", "/ui/oidc/callback?"+q.Encode(), nil)
		if cookie != "" && strings.IndexFunc(cookie, func(r rune) bool { return r < 0x21 || r > 0x7e || r == ';' || r == '"' || r == ',' || r == '\\' }) < 0 {
			req.AddCookie(&http.Cookie{Name: oidcCookie, Value: cookie})
		}
		rec := httptest.NewRecorder()
		e.ui.handler.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			t.Fatalf("the callback answered 200 without a provider:\n%s", rec.Body)
		}
		for _, ck := range rec.Result().Cookies() {
			if ck.Name == sessionCookie && ck.Value != "" {
				t.Fatalf("a session was issued: %v", ck)
			}
		}
	})
}
