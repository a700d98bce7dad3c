package server

import (
	"log/slog"
	"slices"

	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
)

// MCPOptions are the MCP server's options from the config's [mcp] table
// (cfg may be nil). A side-effecting call without a stable identity is
// refused unless the config allows it, or unless lenient (dev, connhost
// mcp without a config), where it runs with a warning.
func (cfg *Config) MCPOptions(lenient bool) mcpserver.Options {
	o := mcpserver.Options{PerRequest: mcpserver.PerRequestRefuse}
	if lenient {
		o.PerRequest = mcpserver.PerRequestWarn
	}
	if cfg != nil {
		o.Approver = cfg.MCP.Approver
		o.ApprovalWait = cfg.MCP.ApprovalWait
		o.TrustedOrigins = cfg.MCP.AllowOrigins
		if cfg.MCP.AllowPerRequest {
			o.PerRequest = mcpserver.PerRequestAllow
		}
	}
	return o
}

// logAuthority logs who may decide what through the API, in the terms an
// operator acts on: dev's open door, and roles no principal holds.
func logAuthority(logger *slog.Logger, o httpapi.Options) {
	has := func(r httpapi.Role) bool {
		if len(o.Principals) == 0 {
			return o.Anonymous.Has(r)
		}
		return slices.ContainsFunc(o.Principals, func(p httpapi.Principal) bool { return p.Has(r) })
	}
	if len(o.Principals) == 0 && o.Anonymous.Has(httpapi.RoleApprover) {
		logger.Warn("no credentials: anyone on this machine can approve, reject and resolve calls through this API",
			"recorded_as", o.Anonymous.Name)
	}
	if !has(httpapi.RoleApprover) {
		logger.Warn("approvals disabled: no principal has role approver, so approve and reject answer 403 approval_not_configured; add a [[principals]] entry with roles = [\"approver\"] to the config")
	}
	for _, p := range o.Principals {
		if selfApprover(p.Roles) {
			logger.Warn("principal may approve the calls it makes itself (allow_self_approval): its approvals are no second pair of eyes",
				"principal", p.Name)
		}
	}
	if len(o.Principals) > 0 && !has(httpapi.RoleRuntime) {
		logger.Warn("no principal has role runtime: executions are refused (set [server] token_env in the config)")
	}
}

// logScopes logs, once any principal is bound to namespaces, where each
// principal acts.
func logScopes(logger *slog.Logger, ps []httpapi.Principal) {
	if !slices.ContainsFunc(ps, func(p httpapi.Principal) bool { return len(p.Namespaces) > 0 }) {
		return
	}
	for _, p := range ps {
		nss := p.Namespaces
		if len(nss) == 0 {
			nss = []string{"* (every namespace)"}
		}
		logger.Info("principal scope", "principal", p.Name, "roles", p.Roles, "namespaces", nss)
	}
}

func principalNames(ps []httpapi.Principal) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}
