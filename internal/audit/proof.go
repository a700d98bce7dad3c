package audit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/connhost/connhost/manifests"
)

// What a manifest's [provider] says the provider does — deduplicate
// requests by a key in a header or a body field — is a claim the author
// writes down. `connhost crashtest --record-proof` proves it against a
// running provider (the row provider_key: a request of the connector
// repeated as it was must make no second effect, and repeated with the
// declared key changed must make one) and records the proof next to the
// manifest, where the audit reads it: the verdict then says who proved
// the claim, against what, and when. Without a proof the claim raises
// provider-key-unproven, unless the provider is one connhost knows
// (KnownIdempotencyProviders) and the key its Idempotency-Key header.
// Like a sign-off it is a plain file: it records a run, it does not
// authenticate one.

// ProofPath returns the provider proof of the manifest at manifestPath:
// the same name with ".proof.json" in place of ".toml".
func ProofPath(manifestPath string) string { return sidecar(manifestPath, ".proof.json") }

// ProviderProof records that connhost crashtest proved a [provider] claim
// against a provider.
type ProviderProof struct {
	Connector string `json:"connector"`
	// IdempotencyHeader and IdempotencyField are the claim proven: the
	// provider deduplicates by this header, or body field.
	IdempotencyHeader string `json:"idempotency_header,omitempty"`
	IdempotencyField  string `json:"idempotency_field,omitempty"`
	// Provider is the provider crashtest ran against (its URL).
	Provider string `json:"provider"`
	// Operations are the operations whose requests were repeated.
	Operations []string `json:"operations"`
	// ProvenAt is when.
	ProvenAt time.Time `json:"proven_at"`
}

// Covers reports whether the proof is about pv's claim: the same key.
func (p ProviderProof) Covers(pv manifests.Provider) bool {
	return strings.EqualFold(p.IdempotencyHeader, pv.IdempotencyHeader) && p.IdempotencyField == pv.IdempotencyField &&
		(pv.IdempotencyHeader != "" || pv.IdempotencyField != "")
}

func (p ProviderProof) String() string {
	return fmt.Sprintf("proven by connhost crashtest against %s at %s (%s)", p.Provider, p.ProvenAt.UTC().Format(time.RFC3339), strings.Join(p.Operations, ", "))
}

// ReadProof reads a provider proof; a missing file is an error wrapping
// os.ErrNotExist.
func ReadProof(path string) (ProviderProof, error) {
	var p ProviderProof
	data, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("audit: read provider proof: %w", err)
	}
	if err := decodeStrict(data, &p); err != nil {
		return p, fmt.Errorf("%w: %s: %w", ErrReviewFile, path, err)
	}
	return p, nil
}

// WriteProof writes p to path atomically.
func WriteProof(path string, p ProviderProof) error { return writeFileJSON(path, p) }

// knownClaim reports whether m's [provider] claim is what connhost knows
// of its hosts: every host a known provider, the key its Idempotency-Key
// header.
func knownClaim(m *manifests.Manifest) bool {
	names := hostNames(m.Capabilities.HTTP)
	return len(names) > 0 && strings.EqualFold(m.Provider.IdempotencyHeader, "Idempotency-Key") && m.Provider.IdempotencyField == "" &&
		!slices.ContainsFunc(names, func(h string) bool { return !slices.Contains(KnownIdempotencyProviders, h) })
}

// providerProof reads the proof next to the manifest, when there is one,
// and raises provider-key-unproven for a claim an idempotent-retry
// operation rests on that neither it nor connhost's knowledge covers.
func (a *auditor) providerProof() *ProviderProof {
	m := a.m
	pv := m.Provider
	if pv.IdempotencyHeader == "" && pv.IdempotencyField == "" {
		return nil
	}
	var proof *ProviderProof
	why := "no proof next to the manifest (" + ProofPath(m.Path) + ")"
	if m.Path != "" {
		switch p, err := ReadProof(ProofPath(m.Path)); {
		case err == nil && p.Covers(pv):
			proof = &p
		case err == nil:
			why = fmt.Sprintf("the proof next to the manifest is about %s", manifests.Provider{IdempotencyHeader: p.IdempotencyHeader, IdempotencyField: p.IdempotencyField}.IdempotencyKey())
		case !errors.Is(err, os.ErrNotExist):
			why = err.Error()
		}
	}
	rests := slices.ContainsFunc(m.Operations, func(op *manifests.Operation) bool { return op.Recovery == manifests.PolicyIdempotentRetry })
	if proof == nil && rests && !knownClaim(m) {
		a.add(CodeProviderKeyUnproven, a.key("provider", "idempotency_header", "idempotency_field"),
			"[provider] says the provider deduplicates requests by %s, and idempotent-retry rests on it, but nothing proved it: %s; run connhost crashtest --probe … --record-proof against a test instance of the provider (a request repeated with the same key must make no second effect, with another key one)",
			pv.IdempotencyKey(), why)
	}
	return proof
}
