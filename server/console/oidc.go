package console

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/connhost/connhost/server/httpapi"
)

// OIDC configures sign-in with an OpenID Connect provider (Options.OIDC):
// the authorization code flow with PKCE, its state and nonce checked, the
// ID token verified against the issuer's keys. The provider only proves
// who the person is: its subject names a principal of Options.Principals
// (Subjects), whose roles and namespaces apply, and whose session is the
// same cookie a token sign-in gets (so removing the principal or changing
// its token ends it). See RATIONALE.md, "Why does an OpenID provider only
// name a principal, and not grant roles?".
type OIDC struct {
	// Issuer is the provider's issuer URL, as its discovery document
	// (<Issuer>/.well-known/openid-configuration) states it. Required.
	Issuer string
	// Name is what the sign-in page offers: "Sign in with <Name>". The
	// default value is the issuer's host.
	Name string
	// ClientID is the console's client at the provider. Required.
	ClientID string
	// ClientSecret is that client's secret; "" for a public client,
	// which PKCE alone protects.
	ClientSecret string
	// RedirectURL is the console's callback as registered at the
	// provider: the URL browsers reach the server at, then
	// Prefix+"oidc/callback". Required.
	RedirectURL string
	// Subjects maps the provider's subject (its "sub" claim) to the name
	// of a principal of Options.Principals. An identity it does not map
	// is refused.
	Subjects map[string]string
	// HTTPClient reaches the provider (discovery, the token endpoint, its
	// keys). The default value is a client with a 15 s timeout.
	HTTPClient *http.Client
}

// oidcCookie carries one sign-in in progress, from the redirect to the
// provider to the provider's redirect back: it is SameSite=Lax, since
// that redirect back is a navigation from the provider's site.
const oidcCookie = "connhost_console_oidc"

// oidcFlowTTL is how long a browser has to sign in at the provider.
const oidcFlowTTL = 10 * time.Minute

// oidcFlow is what oidcCookie holds. It needs no MAC: State is compared
// with the provider's redirect (which a page of another site cannot make
// match a cookie it cannot read), Nonce with the verified ID token, and
// Verifier is proven to the provider; a browser that changes its own
// cookie only fails its own sign-in.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"next"`
}

// oidcSignin is the console's OpenID Connect client. The provider is
// discovered on the first sign-in (and again after a failure), so that a
// provider that is down keeps no server from starting, nor tokens from
// signing in.
type oidcSignin struct {
	cfg OIDC

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func newOIDCSignin(o OIDC, names map[string]bool) (*oidcSignin, error) {
	switch {
	case o.Issuer == "":
		return nil, errors.New("console: OIDC without an issuer")
	case o.ClientID == "":
		return nil, errors.New("console: OIDC without a client id")
	case o.RedirectURL == "":
		return nil, errors.New("console: OIDC without a redirect URL")
	}
	for sub, name := range o.Subjects {
		if !names[name] {
			return nil, fmt.Errorf("console: OIDC subject %q maps to principal %q, which is not one of Principals", sub, name)
		}
	}
	if o.Name == "" {
		o.Name = o.Issuer
		if u, err := url.Parse(o.Issuer); err == nil && u.Host != "" {
			o.Name = u.Host
		}
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	return &oidcSignin{cfg: o}, nil
}

// discover returns the client, reading the provider's discovery document
// the first time.
func (s *oidcSignin) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oauth != nil {
		return s.oauth, s.verifier, nil
	}
	ctx = oidc.ClientContext(ctx, s.cfg.HTTPClient)
	p, err := oidc.NewProvider(ctx, s.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("console: OIDC discovery at %s: %w", s.cfg.Issuer, err)
	}
	s.oauth = &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.cfg.RedirectURL, Scopes: []string{oidc.ScopeOpenID}}
	s.verifier = p.VerifierContext(oidc.ClientContext(context.Background(), s.cfg.HTTPClient), &oidc.Config{ClientID: s.cfg.ClientID})
	return s.oauth, s.verifier, nil
}

// oidcStart sends the browser to the provider, with a new state, nonce
// and PKCE verifier kept in its oidcCookie.
func (c *console) oidcStart(w http.ResponseWriter, r *http.Request) {
	oc, _, err := c.oidc.discover(r.Context())
	if err != nil {
		c.opts.Logger.ErrorContext(r.Context(), "console: OIDC sign-in unavailable", "err", err)
		c.signinRefused(w, r, http.StatusBadGateway, "sign-in with "+c.oidc.cfg.Name+" is unavailable: the provider could not be reached ("+err.Error()+"); sign in with a token, or try again later")
		return
	}
	f := oidcFlow{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(), Next: safeNext(r.URL.Query().Get("next"))}
	b, _ := json.Marshal(f)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: base64.RawURLEncoding.EncodeToString(b), Path: Prefix + "oidc/",
		MaxAge: int(oidcFlowTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.secure(r)})
	http.Redirect(w, r, oc.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), http.StatusSeeOther)
}

// oidcCallback finishes a sign-in: the state must be the browser's own
// sign-in's (else a page of another site, or a replayed redirect, is
// signing it in), the code is exchanged with the PKCE verifier, the ID
// token verified (issuer, audience, expiry, signature) and its nonce
// compared, and its subject must name a principal.
func (c *console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(oidcCookie)
	// Every outcome ends this sign-in: its state is used once.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: Prefix + "oidc/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.secure(r)})
	var f oidcFlow
	if err == nil {
		b, derr := base64.RawURLEncoding.Strict().DecodeString(ck.Value)
		if derr != nil || json.Unmarshal(b, &f) != nil {
			f = oidcFlow{}
		}
	}
	q := r.URL.Query()
	if f.State == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		c.signinRefused(w, r, http.StatusForbidden, "this answer from "+c.oidc.cfg.Name+" belongs to no sign-in this browser started (its state does not match, or the sign-in was already finished or expired): nobody was signed in; sign in again")
		return
	}
	if e := q.Get("error"); e != "" {
		c.signinRefused(w, r, http.StatusUnauthorized, fmt.Sprintf("%s did not sign you in: %s %s", c.oidc.cfg.Name, e, q.Get("error_description")))
		return
	}
	oc, verifier, err := c.oidc.discover(r.Context())
	if err != nil {
		c.opts.Logger.ErrorContext(r.Context(), "console: OIDC sign-in unavailable", "err", err)
		c.signinRefused(w, r, http.StatusBadGateway, "sign-in with "+c.oidc.cfg.Name+" is unavailable: "+err.Error())
		return
	}
	ctx := oidc.ClientContext(r.Context(), c.oidc.cfg.HTTPClient)
	tok, err := oc.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		c.opts.Logger.WarnContext(r.Context(), "console: OIDC code exchange failed", "err", err)
		c.signinRefused(w, r, http.StatusUnauthorized, c.oidc.cfg.Name+" refused to complete the sign-in (the code exchange failed); sign in again")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		c.signinRefused(w, r, http.StatusBadGateway, c.oidc.cfg.Name+" answered without an ID token; sign in again")
		return
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		c.opts.Logger.WarnContext(r.Context(), "console: OIDC ID token refused", "err", err)
		c.signinRefused(w, r, http.StatusUnauthorized, "the ID token from "+c.oidc.cfg.Name+" did not verify: "+err.Error())
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		c.signinRefused(w, r, http.StatusUnauthorized, "the ID token from "+c.oidc.cfg.Name+" was issued for another sign-in (its nonce does not match); sign in again")
		return
	}
	name, ok := c.oidc.cfg.Subjects[idt.Subject]
	var cr credential
	for _, x := range c.creds {
		if ok && x.p.Name == name {
			cr = x
		}
	}
	if cr.p.Name == "" {
		c.signinRefused(w, r, http.StatusForbidden, fmt.Sprintf("%s signed in subject %q, which is no principal of this server: ask its operator to add oidc_subject = %q to your [[principals]] entry", c.oidc.cfg.Name, idt.Subject, idt.Subject))
		return
	}
	if !cr.p.Has(httpapi.RoleRuntime, httpapi.RoleApprover, httpapi.RoleOperator) {
		c.signinRefused(w, r, http.StatusForbidden, fmt.Sprintf("principal %q has role %s only, which reads /metrics and nothing else", cr.p.Name, rolesText(cr.p.Roles)))
		return
	}
	value, err := c.startSession(r.Context(), cr)
	if err != nil {
		c.opts.Logger.ErrorContext(r.Context(), "console: sign-in not recorded", "principal", cr.p.Name, "err", err)
		c.signinRefused(w, r, http.StatusServiceUnavailable, "the sign-in could not be recorded ("+err.Error()+"); try again in a moment")
		return
	}
	c.setCookie(w, r, sessionCookie, value, c.opts.SessionTTL)
	c.opts.Logger.InfoContext(r.Context(), "console: signed in with OIDC", "principal", cr.p.Name, "issuer", c.oidc.cfg.Issuer, "subject", idt.Subject)
	// A page, not a redirect: the session cookie is SameSite=Strict, and
	// a browser does not send it along a redirect chain that began on the
	// provider's site.
	c.render(w, "signedin", http.StatusOK, &view{Title: "Signed in", Goto: f.Next, Data: cr.p})
}

// signinRefused answers with the sign-in page and why it did not sign
// the browser in.
func (c *console) signinRefused(w http.ResponseWriter, r *http.Request, status int, text string) {
	c.opts.Logger.WarnContext(r.Context(), "console: sign-in refused", "why", text)
	tok := randomToken()
	c.setCookie(w, r, signinCookie, tok, 15*time.Minute)
	v := &view{Title: "Sign in", CSRF: tok, Data: signinData{Next: Prefix, OIDC: c.oidcName()}, Notes: []note{{Error: true, Text: text}}}
	c.render(w, "signin", status, v)
}
