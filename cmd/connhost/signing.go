package main

import (
	"fmt"
	"slices"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/httpapi"
)

// approvalKeys returns host.Options.ApprovalKeys for the config: the key
// of every principal with role approver, derived from its token. Every
// node of a fleet reads the same config, so each verifies what another
// signed.
func (c *Config) approvalKeys() map[string][]byte {
	keys := map[string][]byte{}
	for _, p := range c.Principals {
		if slices.Contains(p.Roles, httpapi.RoleApprover) && p.Token != "" {
			keys[p.Name] = host.ApprovalKey(p.Token)
		}
	}
	return keys
}

// approvalNamespaces returns host.Options.ApprovalNamespaces for the
// config: the namespaces of every approver principal that has some (none,
// or ["*"]: every namespace). Every node reads the same config, so none
// dispatches an approval its reviewer could not give through the API.
func (c *Config) approvalNamespaces() map[string][]string {
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

// principalWith reports whether the config names a principal called name
// holding one of roles.
func (c *Config) principalWith(name string, roles ...httpapi.Role) bool {
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

// deciders are the roles whose name a direct decision on a shared ledger
// may be recorded under, per command: the roles the API requires.
var deciders = map[string][]httpapi.Role{
	"approve": {httpapi.RoleApprover},
	"reject":  {httpapi.RoleApprover},
	"resolve": {httpapi.RoleApprover, httpapi.RoleOperator},
	"cancel":  {httpapi.RoleRuntime, httpapi.RoleOperator},
}

// checkSharedApproval refuses, before anything is opened, an approval or
// rejection made directly on a shared ledger that could not be signed: by
// must be an approver principal of the config, whose token (in the config,
// as on every node) signs it. The database's credentials alone are no
// approval authority: no node dispatches an unsigned approval.
func checkSharedApproval(cfg *Config, verb, by, tokenEnv string) error {
	if cfg.principalWith(by, deciders[verb]...) {
		return nil
	}
	who := "without --by"
	if by != "" {
		who = fmt.Sprintf("%q is no principal with role approver in --config", by)
		if cfg == nil {
			who = fmt.Sprintf("without --config, %q is no principal with role approver", by)
		}
	}
	return fmt.Errorf("%s on the shared ledger: %s, so the decision cannot be signed, and nodes dispatch only approvals signed with an approver's token (the database's credentials are no approval authority); %s through a node: connhost %s … --server URL, with your token in $%s",
		verb, who, verb, verb, tokenEnv)
}

// sharedActor is who a resolution or cancellation made directly on a
// shared ledger is recorded as: by when the config names it as a principal
// with a role the API requires for verb, else the database role the
// ledger connects as ("db:<role>"), which is all the connection proves.
func sharedActor(cfg *Config, verb, by, role string) string {
	if by != "" && cfg.principalWith(by, deciders[verb]...) {
		return by
	}
	return "db:" + role
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
