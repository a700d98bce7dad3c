package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ErrUnsupported is what a Provider method returns for an optional
// question its provider does not answer (a probe route answering 404).
var ErrUnsupported = errors.New("crashtest: the provider does not answer this")

// Provider is what the matrix asks a connector's provider. Effects is
// required; the others may answer ErrUnsupported (Exists: receipts are not
// checked; Args: the operation's arguments must come from Options.Args;
// Arm: the in-flight row is n/a).
type Provider interface {
	// Effects returns how many effects the provider has applied so far.
	Effects(ctx context.Context) (int, error)
	// Exists reports whether the provider holds the object receipt names.
	Exists(ctx context.Context, receipt string) (bool, error)
	// Args returns sample arguments for one call of operation.
	Args(ctx context.Context, operation string) (json.RawMessage, error)
	Holder
}

// Probe is a Provider that asks a provider's probe endpoints over HTTP
// (see the package documentation). It is safe for concurrent use.
type Probe struct {
	base   string
	client *http.Client

	mu      sync.Mutex
	answers []int // what the provider answered the released requests, when it said
	told    bool  // the last release said
}

// NewProbe returns a Probe for the probe URL base (for connhost crashtest,
// the provider URL followed by /_crashtest).
func NewProbe(base string) *Probe {
	return &Probe{base: strings.TrimSuffix(base, "/"), client: &http.Client{Timeout: 30 * time.Second}}
}

// URL returns the probe URL.
func (p *Probe) URL() string { return p.base }

// do sends one request and decodes a JSON answer into out (when not nil).
// A 404 or 501 is ErrUnsupported.
func (p *Probe) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		return fmt.Errorf("crashtest: probe %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("crashtest: probe %s %s%s: %w", method, p.base, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusNotImplemented:
		return fmt.Errorf("%w: %s %s%s answered %s", ErrUnsupported, method, p.base, path, resp.Status)
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("crashtest: probe %s %s%s: %s: %s", method, p.base, path, resp.Status, bytes.TrimSpace(b))
	case out == nil:
		return nil
	case len(bytes.TrimSpace(b)) == 0:
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = nil
			return nil
		}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("crashtest: probe %s %s%s: unreadable answer %q: %w", method, p.base, path, b, err)
	}
	return nil
}

// Effects implements Provider: GET {probe}/effects.
func (p *Probe) Effects(ctx context.Context) (int, error) {
	var out struct {
		Effects *int `json:"effects"`
	}
	if err := p.do(ctx, "GET", "/effects", nil, &out); err != nil {
		return 0, err
	}
	if out.Effects == nil {
		return 0, fmt.Errorf("crashtest: probe GET %s/effects: no \"effects\" in the answer", p.base)
	}
	return *out.Effects, nil
}

// Exists implements Provider: GET {probe}/receipts/{receipt}. The matrix
// asks it about the receipt of every succeeded call of an external
// operation and fails the cell when the answer is false; a succeeded call
// without a receipt fails its cell too, once the provider answers
// receipts at all. (A delete's receipt names an object that is gone: a
// provider with deletes answers receipts by what a succeeded call of the
// operation leaves, or describes them in a probe config instead, whose
// removes says so.)
func (p *Probe) Exists(ctx context.Context, receipt string) (bool, error) {
	var out struct {
		Exists *bool `json:"exists"`
	}
	if err := p.do(ctx, "GET", "/receipts/"+url.PathEscape(receipt), nil, &out); err != nil {
		return false, err
	}
	if out.Exists == nil {
		return false, fmt.Errorf("crashtest: probe GET %s/receipts/%s: no \"exists\" in the answer", p.base, receipt)
	}
	return *out.Exists, nil
}

// Args implements Provider: GET {probe}/args/{operation}.
func (p *Probe) Args(ctx context.Context, operation string) (json.RawMessage, error) {
	var out json.RawMessage
	if err := p.do(ctx, "GET", "/args/"+url.PathEscape(operation), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Arm implements Holder: POST {probe}/hold. A provider that cannot hold
// the operation's request answers ErrCannotHold.
func (p *Probe) Arm(ctx context.Context, operation string) error {
	err := p.do(ctx, "POST", "/hold", map[string]string{"operation": operation}, nil)
	if errors.Is(err, ErrUnsupported) {
		return fmt.Errorf("%w: %w", ErrCannotHold, err)
	}
	return err
}

// WaitHeld implements Holder: it polls GET {probe}/held until a request is
// held or ctx ends.
func (p *Probe) WaitHeld(ctx context.Context) error {
	for {
		var out struct {
			Held int `json:"held"`
		}
		if err := p.do(ctx, "GET", "/held", nil, &out); err != nil {
			return err
		}
		if out.Held > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Release implements Holder: POST {probe}/release. A provider that
// answers {"answers": [status…]} once the held requests were answered
// tells HeldAnswer what they were.
func (p *Probe) Release(ctx context.Context) error {
	var out struct {
		Answers *[]int `json:"answers"`
	}
	var raw json.RawMessage
	if err := p.do(ctx, "POST", "/release", nil, &raw); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers, p.told = nil, false
	if len(raw) > 0 && json.Unmarshal(raw, &out) == nil && out.Answers != nil {
		p.answers, p.told = *out.Answers, true
	}
	return nil
}

// HeldAnswer implements HeldAnswerer: what the provider answered the
// released request, as its release said, or ErrNoHeldAnswer.
func (p *Probe) HeldAnswer(context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.told || len(p.answers) == 0 {
		return 0, ErrNoHeldAnswer
	}
	return p.answers[len(p.answers)-1], nil
}
