//go:build unix

package soak

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// transportError is a request that got no HTTP answer: the host was
// killed (or is restarting). The caller cannot know whether the request
// took effect and re-issues it, as a runtime would.
type transportError struct{ err error }

func (e *transportError) Error() string { return "transport: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func isTransport(err error) bool {
	var te *transportError
	return errors.As(err, &te)
}

// apiClient speaks the connhost HTTP API.
type apiClient struct{ hc *http.Client }

func newAPIClient() *apiClient {
	// The timeout only unblocks a request whose connection a kill left
	// half-open; an answered request takes milliseconds.
	return &apiClient{hc: &http.Client{Timeout: 60 * time.Second}}
}

// do sends method url with body (JSON, when not nil). A 200 is decoded into
// out; a problem document is returned as *httpapi.Problem; no answer at all
// is a *transportError; anything else is an error.
func (c *apiClient) do(ctx context.Context, method, u string, body, out any) (*httpapi.Problem, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &transportError{err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &transportError{fmt.Errorf("%s %s: reading the answer: %w", method, u, err)}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusOK && mt == "application/json":
		if out == nil {
			return nil, nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: decoding %q: %w", method, u, b, err)
		}
		return nil, nil
	case mt == "application/problem+json":
		var p httpapi.Problem
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("%s %s: decoding problem %q: %w", method, u, b, err)
		}
		return &p, nil
	}
	return nil, fmt.Errorf("%s %s: unexpected answer %d %s: %q", method, u, resp.StatusCode, mt, b)
}

// execute is POST /v1/executions.
func (c *apiClient) execute(ctx context.Context, api string, req host.ToolCall) (host.Result, *httpapi.Problem, error) {
	var res host.Result
	p, err := c.do(ctx, "POST", api+"/v1/executions", req, &res)
	return res, p, err
}

// approve is POST /v1/approvals/{id}/approve.
func (c *apiClient) approve(ctx context.Context, api, approvalID, digest string) (host.Result, *httpapi.Problem, error) {
	var res host.Result
	p, err := c.do(ctx, "POST", api+"/v1/approvals/"+url.PathEscape(approvalID)+"/approve",
		httpapi.DecisionRequest{By: "soak-reviewer", Digest: digest}, &res)
	return res, p, err
}

// resolve is POST /v1/executions/{id}/resolve.
func (c *apiClient) resolve(ctx context.Context, api, id string, r httpapi.ResolveRequest) (host.Result, *httpapi.Problem, error) {
	var res host.Result
	p, err := c.do(ctx, "POST", api+"/v1/executions/"+url.PathEscape(id)+"/resolve", r, &res)
	return res, p, err
}

// recover is POST /v1/recover.
func (c *apiClient) recoverAll(ctx context.Context, api string) (host.RecoveryReport, *httpapi.Problem, error) {
	var rep host.RecoveryReport
	p, err := c.do(ctx, "POST", api+"/v1/recover", nil, &rep)
	return rep, p, err
}

// get is GET /v1/executions/{id}.
func (c *apiClient) get(ctx context.Context, api, id string) (httpapi.Execution, *httpapi.Problem, error) {
	var v httpapi.Execution
	p, err := c.do(ctx, "GET", api+"/v1/executions/"+url.PathEscape(id), nil, &v)
	return v, p, err
}

// list returns every execution (in state, when not empty), paging through
// GET /v1/executions.
func (c *apiClient) list(ctx context.Context, api, state string) ([]httpapi.Execution, error) {
	var out []httpapi.Execution
	q := url.Values{"limit": {"1000"}}
	if state != "" {
		q.Set("state", state)
	}
	for {
		var l httpapi.ListResponse
		p, err := c.do(ctx, "GET", api+"/v1/executions?"+q.Encode(), nil, &l)
		if err != nil {
			return nil, err
		}
		if p != nil {
			return nil, fmt.Errorf("list executions: %s: %s", p.Code, p.Detail)
		}
		out = append(out, l.Executions...)
		if l.Next == "" {
			return out, nil
		}
		q.Set("after", l.Next)
	}
}

// messageID is the Message-ID the email connector derives from an
// idempotency key (plugins/email/mailpit.go, messageID): the key itself
// when it is made of [A-Za-z0-9_-] (at most 128 bytes), else
// "sha256."+hex(sha256(key)); then "@connhost.invalid".
func messageID(key string) string {
	verbatim := key != "" && len(key) <= 128
	for i := 0; i < len(key) && verbatim; i++ {
		c := key[i]
		verbatim = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if verbatim {
		return key + "@connhost.invalid"
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256." + hex.EncodeToString(sum[:]) + "@connhost.invalid"
}
