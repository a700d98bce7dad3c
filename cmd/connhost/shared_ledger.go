package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
	"github.com/connhost/connhost/server"
)

// EnvLedger is the environment variable --ledger defaults to: a connection
// string with a password belongs in the environment, not on a command
// line that every user of the machine can read.
const EnvLedger = "CONNHOST_LEDGER"

// sharedLedger returns the connection string of the shared ledger the
// command works on: --ledger, else $CONNHOST_LEDGER, else (with --config)
// the config's [server] ledger or ledger_env; "" for the Pebble ledger in
// --data. It also returns the config's node id and lease TTL, if any.
func (a *app) sharedLedger() (dsn string, cfg *server.Config, err error) {
	if a.g.config != "" {
		if cfg, err = loadConfig(a.g.config, os.LookupEnv); err != nil {
			return "", nil, err
		}
	}
	switch {
	case a.g.ledger != "":
		dsn = a.g.ledger
		if server.DSNHasPassword(dsn) && !a.warnedDSN {
			a.warnedDSN = true
			fmt.Fprintf(a.stderr, "connhost: warning: the --ledger connection string holds a password, which every user of this machine can read in the process list (ps, /proc/<pid>/cmdline); give the password in PGPASSWORD or ~/.pgpass, or the whole string in $%s or in the variable [server] ledger_env names\n", EnvLedger)
		}
	case os.Getenv(EnvLedger) != "":
		dsn = os.Getenv(EnvLedger)
	case cfg != nil:
		dsn = cfg.Server.Ledger
	}
	return dsn, cfg, nil
}

// sharedOpen says how openShared opens a shared ledger.
type sharedOpen struct {
	dsn string
	// mustExist: readers, so that a mistyped connection string does not
	// create a ledger.
	mustExist bool
	// witness is this process's witness of the ledger; init (--init)
	// starts a new ledger where the witness names one that is gone.
	witness string
	init    bool
	logger  *slog.Logger
}

// openShared opens the shared ledger o.dsn names.
func openShared(ctx context.Context, o sharedOpen) (*pgledger.DB, error) {
	opts := pgledger.Options{DSN: o.dsn, ApplicationName: "connhost", Logger: o.logger, MustExist: o.mustExist, WitnessPath: o.witness, Init: o.init}
	if err := badDSN(o.dsn); err != nil {
		return nil, err
	}
	db, err := pgledger.Open(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("shared ledger %s: %w", server.RedactDSN(o.dsn), err)
	}
	return db, nil
}

// badDSN says that dsn is not a connection string, without showing it:
// the parser's message may quote the string, password and all.
func badDSN(dsn string) error {
	o := pgledger.Options{DSN: dsn}
	o.EnsureDefaults()
	if err := o.Validate(); errors.Is(err, ledger.ErrInvalid) {
		return fmt.Errorf("--ledger (or %s, or [server] ledger): not a PostgreSQL connection string such as postgres://connhost@db.example:5432/connhost?sslmode=verify-full (the value is not shown: it may hold a password)", EnvLedger)
	}
	return nil
}

// nodeID is the node id of this process on a shared ledger: --node, else
// the config's, else for a server the host name (stable across restarts,
// so a restarted server takes over its former calls at once), and for a
// one-shot command the host name, "cli" and the process id (unique: a
// one-shot command running beside a server on the same machine must not
// take that server's lease over).
func (a *app) nodeID(cfg *server.Config, server bool) string {
	switch {
	case a.g.node != "":
		return a.g.node
	case cfg != nil && cfg.Server.Node != "":
		return cfg.Server.Node
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "connhost"
	}
	if server {
		return host
	}
	return fmt.Sprintf("%s-cli-%d", host, os.Getpid())
}
