package audit

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/connhost/connhost/manifests"
)

// Verdict is what an operation's declared policy means for one call: what
// the host does when the call's outcome is unknown after a crash, what
// that relies on, who agrees before the call runs, how often the provider
// may be asked, and where the connector may reach. It is what a reviewer
// signs off.
type Verdict struct {
	// AfterCrash is what the host does with a call whose outcome is
	// unknown.
	AfterCrash string `json:"after_crash"`
	// ReliesOn is what must hold for AfterCrash never to duplicate an
	// effect.
	ReliesOn string `json:"relies_on"`
	// Approval says who agrees before a call runs.
	Approval string `json:"approval"`
	// MaxDispatches is how many times one call may be dispatched to the
	// connector, retries and recovery re-dispatches included
	// (max_attempts).
	MaxDispatches int `json:"max_dispatches"`
	// Hosts are the origins the connector may reach (capabilities.http;
	// a deployment may add its own with allow_http in connhost.toml).
	Hosts []string `json:"hosts"`
	// Repeats says what a call meets that repeats a recent one under a
	// new tool-call id (the duplicate-intent guard, duplicate_window);
	// external operations only.
	Repeats string `json:"repeats,omitempty"`
	// KeyRetention is, for idempotent-retry, how long after its intent an
	// uncertain call is still re-sent with its key: the [provider]
	// idempotency_retention, at most the host's default of 24h
	// (DefaultKeyRetention). An older call is asked of reconcile when the
	// module exports it for the operation, else it becomes
	// recovery_required (AfterCrash says which).
	KeyRetention string `json:"key_retention,omitempty"`
}

// DefaultKeyRetention is the host's default key retention
// (host.Options.KeyRetention): a manifest's [provider]
// idempotency_retention can shorten it, not lengthen it.
const DefaultKeyRetention = 24 * time.Hour

// sameIntent says which calls the duplicate-intent guard takes for one
// (operation key intent).
func sameIntent(op *manifests.Operation) string {
	const spelled = "text compared in Unicode NFC, numbers by value, an empty value as an absent one"
	if len(op.Intent) == 0 {
		return "with the same arguments (" + spelled + ")"
	}
	fields := make([]string, len(op.Intent))
	for i, f := range op.Intent {
		fields[i] = f.String()
	}
	return "with the same " + strings.Join(fields, ", ") + ", whatever its other arguments (" + spelled + "),"
}

func (a *auditor) verdict(op *manifests.Operation) Verdict {
	v := Verdict{MaxDispatches: op.MaxAttempts, Hosts: orEmpty(a.m.Capabilities.HTTP), Approval: "none: the model's call runs as issued"}
	if op.RequiresApproval {
		v.Approval = fmt.Sprintf("a reviewer approves the exact arguments; the request expires after %s", manifests.FormatDuration(op.ApprovalTTL))
	}
	if op.Effect == manifests.EffectExternal {
		switch {
		case op.DuplicateWindow == 0:
			v.Repeats = "not guarded: a call re-issued under a new tool-call id runs again (no duplicate_window)"
		case op.OnDuplicate == manifests.DuplicateAnswer:
			v.Repeats = fmt.Sprintf("a call %s as one in the same session within %s is not dispatched: answered with that call's outcome once it succeeded, held for a reviewer while it is in flight", sameIntent(op), manifests.FormatDuration(op.DuplicateWindow))
		default:
			v.Repeats = fmt.Sprintf("a call %s as one succeeded or in flight in the same session within %s is not dispatched: it is held for a reviewer as a possible duplicate", sameIntent(op), manifests.FormatDuration(op.DuplicateWindow))
		}
	}
	hosts := strings.Join(hostNames(a.m.Capabilities.HTTP), ", ")
	if hosts == "" {
		hosts = "the provider a deployment allows (allow_http: capabilities.http is empty)"
	}
	switch {
	case op.Effect == manifests.EffectRead && op.Recovery == "":
		v.AfterCrash = "re-executes the call"
		v.ReliesOn = "the operation having no side effect (declared effect \"read\")"
	case op.Recovery == manifests.PolicyManual:
		v.AfterCrash = "stops: the call becomes recovery_required and its session is fenced until an operator resolves it"
		v.ReliesOn = "an operator finding out at " + hosts + " whether the call took effect"
	case op.Recovery == manifests.PolicyIdempotentRetry:
		retention := DefaultKeyRetention
		if d := a.m.Provider.IdempotencyRetention; d > 0 && d < retention {
			retention = d
		}
		v.KeyRetention = manifests.FormatDuration(retention)
		older := "reconcile is asked if the module exports it for the operation, else it becomes recovery_required (the module was not checked)"
		if a.facts != nil && a.facts.Description != nil {
			if info, _ := a.facts.Description.Operation(op.Name); info.Reconcile {
				older = "the connector's reconcile is asked instead (the module exports it): applied → succeeded, not applied → re-dispatch, unknown → recovery_required"
			} else {
				older = "it becomes recovery_required (the module exports no reconcile for it)"
			}
		}
		v.AfterCrash = fmt.Sprintf("re-dispatches the call with the same idempotency key (execute_with_key) within %s of its intent (the provider's key retention); an older call is never re-sent with its key: %s",
			v.KeyRetention, older)
		v.ReliesOn = a.idempotencyPromise(hosts)
	case op.Recovery == manifests.PolicyReconcile:
		v.AfterCrash = "asks the connector's reconcile whether the call took effect: applied → succeeded, not applied → re-dispatch, unknown → recovery_required"
		v.ReliesOn = fmt.Sprintf("the connector's reconcile finding out at %s whether the call took effect (by its key, or by what it leaves behind: a record made or gone), and not_applied being true %s after the attempt was dispatched (reconcile_settle)",
			hosts, manifests.FormatDuration(op.ReconcileSettle))
	}
	return v
}

// idempotencyPromise says whose promise an idempotent-retry policy rests
// on: the manifest's [provider] declaration, a known provider, or nobody's.
func (a *auditor) idempotencyPromise(hosts string) string {
	pv := a.m.Provider
	if key := pv.IdempotencyKey(); key != "" {
		who := pv.Name
		if who == "" {
			who = hosts
		}
		proven := "not proven: see provider-key-unproven"
		switch {
		case a.proof != nil:
			proven = a.proof.String()
		case knownClaim(a.m):
			proven = "a provider connhost knows to do so"
		}
		return fmt.Sprintf("%s deduplicating requests by %s for %s (declared in [provider], line %d; %s)",
			who, key, manifests.FormatDuration(pv.IdempotencyRetention), a.key("provider", "idempotency_header", "idempotency_field").line, proven)
	}
	names := hostNames(a.m.Capabilities.HTTP)
	if len(names) > 0 && !slices.ContainsFunc(names, func(h string) bool { return !slices.Contains(KnownIdempotencyProviders, h) }) {
		return hosts + " deduplicating requests by Idempotency-Key for at least 24h (a provider connhost knows)"
	}
	return "an unverified promise that " + hosts + " deduplicates requests by key (see idempotency-unknown-provider)"
}

// hostNames returns the host names of origins, in order, without repeats.
func hostNames(origins []string) []string {
	var out []string
	for _, o := range origins {
		if u, err := url.Parse(o); err == nil && !slices.Contains(out, u.Hostname()) {
			out = append(out, u.Hostname())
		}
	}
	return out
}
