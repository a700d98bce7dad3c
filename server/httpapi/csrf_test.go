package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// A page on another site can POST an empty body to a loopback server
// without a preflight; recovery must not run for it. curl's bodiless POST
// (no Origin) still works.
func TestEmptyBodyPostFromAnotherSiteIsRefused(t *testing.T) {
	env := newTestExecutor(t)
	srv := env.serve(t, Options{})
	for _, tc := range []struct {
		name, contentType, origin string
		want                      int
	}{
		{"cross-site text/plain", "text/plain", "https://evil.example", http.StatusUnsupportedMediaType},
		{"cross-site without a content type", "", "https://evil.example", http.StatusUnsupportedMediaType},
		{"curl without a body", "", "", http.StatusOK},
		{"json without a body", "application/json", "https://evil.example", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/recover", strings.NewReader(""))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
