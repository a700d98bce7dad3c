package main

import (
	"fmt"
	"os"

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
