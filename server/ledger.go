package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
)

// SharedLedgerOptions say how OpenSharedLedger opens a shared ledger.
type SharedLedgerOptions struct {
	// DSN is its connection string. Required.
	DSN string
	// MustExist refuses a database without connhost's tables (readers,
	// so that a mistyped connection string does not create a ledger).
	// The default value is false: they are created.
	MustExist bool
	// Witness is this process's witness of the ledger
	// (pgledger.Options.WitnessPath).
	Witness string
	// Init starts a new ledger where the witness names one that is gone
	// (--init). The default value is false.
	Init bool
	// Logger receives the ledger's logs. The default value is
	// slog.Default().
	Logger *slog.Logger
}

// OpenSharedLedger opens the shared ledger on PostgreSQL that o.DSN names.
// Its errors never show the connection string's password.
func OpenSharedLedger(ctx context.Context, o SharedLedgerOptions) (*pgledger.DB, error) {
	opts := pgledger.Options{DSN: o.DSN, ApplicationName: "connhost", Logger: o.Logger, MustExist: o.MustExist, WitnessPath: o.Witness, Init: o.Init}
	if err := CheckDSN(o.DSN); err != nil {
		return nil, err
	}
	db, err := pgledger.Open(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("shared ledger %s: %w", RedactDSN(o.DSN), err)
	}
	return db, nil
}

// CheckDSN says that dsn is not a connection string, without showing it:
// the parser's message may quote the string, password and all.
func CheckDSN(dsn string) error {
	o := pgledger.Options{DSN: dsn}
	o.EnsureDefaults()
	if err := o.Validate(); errors.Is(err, ledger.ErrInvalid) {
		return errors.New("--ledger (or $CONNHOST_LEDGER, or [server] ledger): not a PostgreSQL connection string such as postgres://connhost@db.example:5432/connhost?sslmode=verify-full (the value is not shown: it may hold a password)")
	}
	return nil
}

// nodeID is the node id of this process on a shared ledger: [server]
// node (or --node), else for a server the host name (stable across restarts,
// so a restarted server takes over its former calls at once), and for a
// one-shot command the host name, "cli" and the process id (unique: a
// one-shot command running beside a server on the same machine must not
// take that server's lease over).
func nodeID(cfg *Config, oneShot bool) string {
	if cfg.Server.Node != "" {
		return cfg.Server.Node
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "connhost"
	}
	if !oneShot {
		return host
	}
	return fmt.Sprintf("%s-cli-%d", host, os.Getpid())
}
