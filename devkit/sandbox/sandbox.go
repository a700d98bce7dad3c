// Package sandbox serves the local provider emulators the shipped
// connectors talk to in tests, `connhost sandbox` and `connhost dev`: a
// Stripe API subset (package stripe) and a Mailpit API subset (package
// mailpit), each on its own loopback port so that connector manifests can
// allowlist them as distinct scheme://host:port origins.
//
// Both emulators also serve a test-only control API under /_sandbox/
// (faults, clock, search lag, statistics); Client wraps it together with
// the read endpoints tests use to count real effects.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/mailpit"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// Options configures Start.
type Options struct {
	// Listen is the host:port of the payments (Stripe) emulator. The
	// default value is "127.0.0.1:0" (a free port).
	Listen string
	// EmailListen is the host:port of the email (Mailpit) emulator. The
	// default value is Listen's host with port+1 when Listen names a
	// port, else a free port on Listen's host.
	EmailListen string
	// SearchLag is how long a new payment intent stays invisible to
	// Stripe search. The default value is 0 (tests set it explicitly).
	SearchLag time.Duration
	// IdempotencyRetention is how long Stripe idempotency keys are kept.
	// The default value is 24h.
	IdempotencyRetention time.Duration
	// EmailIgnoreDuplicateIDs runs the email emulator like Mailpit with
	// --ignore-duplicate-ids. The default value is false.
	EmailIgnoreDuplicateIDs bool
	// Now is the emulators' clock. The default value is time.Now.
	Now func() time.Time
	// Logger receives request and fault logs. The default value discards.
	Logger *slog.Logger
	// StateDir, when set, keeps the emulators' state in StateDir/stripe.json
	// and StateDir/mailpit.json: loaded at Start, saved after every change
	// before it is answered, so the emulators can be killed and restarted
	// without forgetting what they did (see stripe.Server.Persist). The
	// directory is created if missing. The default value is "": state in
	// memory only.
	StateDir string
}

// EnsureDefaults fills in the zero fields with their documented defaults.
func (o *Options) EnsureDefaults() error {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.EmailListen == "" {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return fmt.Errorf("sandbox: Listen %q: %w", o.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p == 0 {
			o.EmailListen = net.JoinHostPort(host, "0")
		} else {
			o.EmailListen = net.JoinHostPort(host, strconv.Itoa(p+1))
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Validate reports every invalid field at once.
func (o Options) Validate() error {
	var errs []error
	for name, addr := range map[string]string{"Listen": o.Listen, "EmailListen": o.EmailListen} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: %s %q: %w", name, addr, err))
		}
	}
	if o.SearchLag < 0 {
		errs = append(errs, errors.New("sandbox: SearchLag must not be negative"))
	}
	if o.IdempotencyRetention < 0 {
		errs = append(errs, errors.New("sandbox: IdempotencyRetention must not be negative"))
	}
	return errors.Join(errs...)
}

// The files of Options.StateDir.
const (
	StripeStateFile  = "stripe.json"
	MailpitStateFile = "mailpit.json"
)

// URLs are the base URLs of the emulators, as printed by
// `connhost sandbox --json`.
type URLs struct {
	Payments string `json:"payments"`
	Email    string `json:"email"`
}

// Sandbox is a running pair of emulators. Close stops both.
type Sandbox struct {
	payments *stripe.Server
	email    *mailpit.Server
	urls     URLs
	servers  []*http.Server
	done     chan struct{}
	once     sync.Once
	closeErr error
}

// Start listens on both addresses and serves the emulators until Close is
// called or ctx is done.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := opts.EnsureDefaults(); err != nil {
		return nil, err
	}
	sb := &Sandbox{
		payments: stripe.New(stripe.Options{Now: opts.Now, SearchLag: opts.SearchLag, IdempotencyRetention: opts.IdempotencyRetention, Logger: opts.Logger}),
		// The e-mail emulator relays released messages to itself, as the
		// tests' real Mailpit does: release_message works against dev and
		// sandbox, and its effect is a message that can be counted.
		email: mailpit.New(mailpit.Options{Now: opts.Now, Logger: opts.Logger, IgnoreDuplicateIDs: opts.EmailIgnoreDuplicateIDs, RelayToSelf: true}),
		done:  make(chan struct{}),
	}
	if opts.StateDir != "" {
		// The providers' state holds customers' data: its owner's alone.
		if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: state directory: %w", err)
		}
		if err := sb.payments.Persist(filepath.Join(opts.StateDir, StripeStateFile)); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		if err := sb.email.Persist(filepath.Join(opts.StateDir, MailpitStateFile)); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	var lc net.ListenConfig
	pl, err := lc.Listen(ctx, "tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("sandbox: payments listener: %w", err)
	}
	el, err := lc.Listen(ctx, "tcp", opts.EmailListen)
	if err != nil {
		pl.Close()
		return nil, fmt.Errorf("sandbox: email listener: %w", err)
	}
	sb.urls = URLs{Payments: "http://" + pl.Addr().String(), Email: "http://" + el.Addr().String()}
	for _, p := range []struct {
		l net.Listener
		h http.Handler
	}{{pl, sb.payments}, {el, sb.email}} {
		srv := &http.Server{Handler: p.h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug)}
		sb.servers = append(sb.servers, srv)
		go func() { _ = srv.Serve(p.l) }()
	}
	opts.Logger.Info("sandbox started", "payments", sb.urls.Payments, "email", sb.urls.Email)
	go func() {
		select {
		case <-ctx.Done():
			_ = sb.Close()
		case <-sb.done:
		}
	}()
	return sb, nil
}

// PaymentsURL is the base URL of the Stripe emulator (no trailing slash).
func (sb *Sandbox) PaymentsURL() string { return sb.urls.Payments }

// EmailURL is the base URL of the Mailpit emulator (no trailing slash).
func (sb *Sandbox) EmailURL() string { return sb.urls.Email }

// URLs returns both base URLs.
func (sb *Sandbox) URLs() URLs { return sb.urls }

// Payments returns the Stripe emulator for in-process control.
func (sb *Sandbox) Payments() *stripe.Server { return sb.payments }

// Email returns the Mailpit emulator for in-process control.
func (sb *Sandbox) Email() *mailpit.Server { return sb.email }

// Client returns a Client for this sandbox.
func (sb *Sandbox) Client() *Client { return NewClient(sb.urls.Payments, sb.urls.Email) }

// Close releases held and hanging requests and stops both servers. It is
// safe to call more than once.
func (sb *Sandbox) Close() error {
	sb.once.Do(func() {
		close(sb.done)
		sb.payments.Close()
		sb.email.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var errs []error
		for _, srv := range sb.servers {
			if err := srv.Shutdown(ctx); err != nil {
				errs = append(errs, err, srv.Close())
			}
		}
		sb.closeErr = errors.Join(errs...)
	})
	return sb.closeErr
}
