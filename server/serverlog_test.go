package server

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/connhost/connhost/server/httpapi"
)

// TestLogAuthority: the startup log says who may decide, in the terms an
// operator acts on.
func TestLogAuthority(t *testing.T) {
	anonDev, anonLoop := httpapi.DevLoopback, httpapi.LoopbackRuntime
	runtime := httpapi.Principal{Name: "runtime", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: "t1"}
	rita := httpapi.Principal{Name: "rita", Roles: []httpapi.Role{httpapi.RoleApprover}, Token: "t2"}
	for _, tc := range []struct {
		name      string
		opts      httpapi.Options
		want, not []string
	}{
		{"dev", httpapi.Options{Anonymous: &anonDev}, []string{"anyone on this machine can approve, reject and resolve", "dev-loopback"}, []string{"approvals disabled"}},
		{"serve without tokens", httpapi.Options{Anonymous: &anonLoop}, []string{"approvals disabled", "[[principals]]"}, []string{"anyone on this machine"}},
		{"serve with a runtime token only", httpapi.Options{Principals: []httpapi.Principal{runtime}}, []string{"approvals disabled"}, []string{"anyone", "role runtime"}},
		{"serve with an approver", httpapi.Options{Principals: []httpapi.Principal{runtime, rita}}, nil, []string{"approvals disabled", "anyone"}},
		{"serve with an approver only", httpapi.Options{Principals: []httpapi.Principal{rita}}, []string{"no principal has role runtime"}, []string{"approvals disabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf strings.Builder
			logAuthority(slog.New(slog.NewTextHandler(&buf, nil)), tc.opts)
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, buf.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(buf.String(), n) {
					t.Errorf("log has %q:\n%s", n, buf.String())
				}
			}
		})
	}
}
