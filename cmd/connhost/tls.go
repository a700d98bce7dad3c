package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"sync"
)

// CAFileEnv names a PEM file of certificate authorities the CLI trusts,
// besides the system's, when it reaches a server over https (one with a
// certificate of a private CA, or self-signed).
const CAFileEnv = "CONNHOST_CA_FILE"

// cliClient is the HTTP client of the commands that go through a server:
// the system's roots and those of $CONNHOST_CA_FILE, and a redirect never
// followed, so that neither a token nor a decision goes anywhere but the
// URL whose server proved itself.
var cliClient = sync.OnceValues(func() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if f := os.Getenv(CAFileEnv); f != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", CAFileEnv, err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("$%s: %s holds no PEM certificate", CAFileEnv, f)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
})
