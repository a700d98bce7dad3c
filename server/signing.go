package server

import (
	"fmt"
	"slices"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// ApprovalKeys returns host.Options.ApprovalKeys for the config: the key
// of every principal with role approver, derived from its token. Every
// node of a fleet reads the same config, so each verifies what another
// signed.
func (c *Config) ApprovalKeys() map[string][]byte {
	keys := map[string][]byte{}
	for _, p := range c.Principals {
		if slices.Contains(p.Roles, httpapi.RoleApprover) && p.Token != "" {
			keys[p.Name] = host.ApprovalKey(p.Token)
		}
	}
	return keys
}

// ApprovalNamespaces returns host.Options.ApprovalNamespaces for the
// config: the namespaces of every approver principal that has some (none,
// or ["*"]: every namespace). Every node reads the same config, so none
// dispatches an approval its reviewer could not give through the API.
func (c *Config) ApprovalNamespaces() map[string][]string {
	nss := map[string][]string{}
	for _, p := range c.Principals {
		if slices.Contains(p.Roles, httpapi.RoleApprover) {
			if s := scoped(p.Namespaces); len(s) > 0 {
				nss[p.Name] = s
			}
		}
	}
	return nss
}

// PrincipalWith reports whether the config names a principal called name
// holding one of roles.
func (c *Config) PrincipalWith(name string, roles ...httpapi.Role) bool {
	if c == nil {
		return false
	}
	for _, p := range c.Principals {
		if p.Name == name && slices.ContainsFunc(roles, func(r httpapi.Role) bool { return slices.Contains(p.Roles, r) }) {
			return true
		}
	}
	return false
}

// checkSelfApproval refuses a principal holding roles runtime and approver
// without allow_self_approval: its token could execute a gated call and
// approve it, and the approval would be no second pair of eyes. serve logs
// every principal admitted with it (logAuthority).
func (c *Config) checkSelfApproval(lines map[string]int, bad func(key, format string, args ...any)) {
	for i, p := range c.Principals {
		if selfApprover(p.Roles) && !p.AllowSelfApproval {
			bad(fmt.Sprintf("principals.%d.roles", i), "principal %s holds roles runtime and approver: its token could approve the calls it makes itself; give the reviewer a principal (and token) of their own, or set allow_self_approval = true where one user both calls and approves (an MCP client approving in its own dialog)", p.Name)
		}
	}
}

// selfApprover reports whether roles hold both runtime and approver.
func selfApprover(roles []httpapi.Role) bool {
	return slices.Contains(roles, httpapi.RoleRuntime) && slices.Contains(roles, httpapi.RoleApprover)
}
