package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ZitadelOPVersion is the release of github.com/zitadel/oidc whose example
// OpenID provider (example/server) tests sign in against. It must match
// the tool pinned in tools/zitadel-op/go.mod.
const ZitadelOPVersion = "v3.52.0"

// EnvZitadelOPBin names a prebuilt example OP to use instead of building
// one. Without it, and when it cannot be built, a test fails under CI and,
// with CONNHOST_SKIP_ZITADEL_OP=1 and CI unset, is skipped.
const (
	EnvZitadelOPBin  = "CONNHOST_ZITADEL_OP_BIN"
	EnvSkipZitadelOP = "CONNHOST_SKIP_ZITADEL_OP"
)

// OPUser is a user of the example OP: it signs in on the OP's login form
// with Username and Password, and the OP names it by ID (the ID token's
// "sub" claim).
type OPUser struct {
	ID       string
	Username string
	Password string
}

// OP is a running example OpenID provider.
type OP struct {
	// Issuer is its issuer URL, http://localhost:PORT/ (the example
	// issues for localhost only).
	Issuer string
	// ClientID and ClientSecret are its confidential web client
	// ("web"/"secret"), which allows PKCE and the redirect URIs
	// StartZitadelOP was given.
	ClientID, ClientSecret string
}

// ZitadelOPBin returns the path of the pinned example OP, building it on
// first use (cached in the user cache dir like Mailpit's).
func ZitadelOPBin(tb testing.TB) string {
	tb.Helper()
	p, err := findOrBuildTool(pinnedTool{name: "zitadel example OP", dir: "zitadel-op", version: ZitadelOPVersion, envBin: EnvZitadelOPBin,
		pkg: "github.com/zitadel/oidc/v3/example/server", timeout: 15 * time.Minute})
	if err != nil {
		if os.Getenv(EnvSkipZitadelOP) == "1" && os.Getenv("CI") == "" {
			tb.Skipf("testenv: real OpenID provider unavailable and %s=1: %v", EnvSkipZitadelOP, err)
		}
		tb.Fatalf("testenv: real OpenID provider unavailable (set %s to a prebuilt binary; locally %s=1 skips): %v", EnvZitadelOPBin, EnvSkipZitadelOP, err)
	}
	return p
}

// StartZitadelOP starts the pinned example OP on a free port with users
// (its in-memory store) and a web client that may redirect to
// redirectURIs, and waits until its discovery document answers. It is
// stopped in tb.Cleanup (SIGTERM, then SIGKILL after 5 s).
func StartZitadelOP(tb testing.TB, users []OPUser, redirectURIs ...string) *OP {
	tb.Helper()
	bin := ZitadelOPBin(tb)
	dir := tb.TempDir()
	store := map[string]map[string]any{}
	for _, u := range users {
		store[u.ID] = map[string]any{"ID": u.ID, "Username": u.Username, "Password": u.Password,
			"FirstName": u.Username, "LastName": "Test", "Email": u.Username + "@example.com", "EmailVerified": true, "PreferredLanguage": "en"}
	}
	b, err := json.Marshal(store)
	if err != nil {
		tb.Fatal(err)
	}
	usersFile := filepath.Join(dir, "users.json")
	if err := os.WriteFile(usersFile, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a freed port can be taken before the OP binds it
		op, err := startZitadelOP(tb, bin, dir, usersFile, redirectURIs)
		if err == nil {
			return op
		}
		lastErr = err
	}
	tb.Fatalf("testenv: starting the example OP: %v", lastErr)
	return nil
}

func startZitadelOP(tb testing.TB, bin, dir, usersFile string, redirectURIs []string) (*OP, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, fmt.Sprintf("op-%d.log", port))
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "USERS_FILE="+usersFile, "REDIRECT_URI="+strings.Join(redirectURIs, ","))
	exited, stop, err := startLogged(cmd, logPath)
	if err != nil {
		return nil, err
	}
	op := &OP{Issuer: fmt.Sprintf("http://localhost:%d/", port), ClientID: "web", ClientSecret: "secret"}
	if err := waitOP(op.Issuer, exited, 30*time.Second); err != nil {
		stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w\nOP log:\n%s", err, log)
	}
	tb.Cleanup(stop)
	return op, nil
}

// waitOP waits until the OP serves its discovery document.
func waitOP(issuer string, exited <-chan struct{}, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		select {
		case <-exited:
			return errors.New("the example OP exited before it was ready")
		default:
		}
		resp, err := client.Get(issuer + ".well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("discovery: %s", resp.Status)
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("the example OP is not ready after %s (last error: %v)", timeout, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
