package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
)

func (a *app) ledgerCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "ledger",
		Short: "Operate on the ledger itself (back it up, restore a backup, accept a restore)",
		Long: `ledger groups the operations on the ledger itself rather than on its
executions.

A ledger's witness (--witness, [server] witness; by default <data>.witness
beside --data) holds what this deployment has acknowledged of its ledger:
its identity, how far it is known to have got, the sessions written to it
lately. It is kept where a restore of the data directory, or of the
database, does not reach. Every command refuses (exit 6) a ledger that is
missing, another one, or behind its witness: an older copy restored in its
place would run again the calls it forgot. connhost ledger accept-restore
is the deliberate way to use a restored ledger.`,
		Args: cobra.NoArgs,
	}
	c.AddCommand(a.acceptRestoreCommand(), a.backupCommand(), a.restoreBackupCommand())
	return c
}

func (a *app) backupCommand() *cobra.Command {
	var df decisionFlags
	c := &cobra.Command{
		Use:   "backup DIR",
		Short: "Take a consistent copy of the ledger, also while serve or dev runs",
		Long: `backup writes a consistent copy of the Pebble ledger in --data into DIR, a
directory that must not exist yet: a checkpoint of the ledger (DIR/ledger)
and what it holds (DIR/backup.json: the ledger's identity, generation, and
at least how many committed writes it holds).

While connhost serve or dev holds the ledger (it writes server.json in
--data), the copy is taken by that process through its API, without
stopping it: with an operator's token in $CONNHOST_APPROVER_TOKEN (or the
variable --token-env names), of an operator of every namespace; DIR is
then a path on the server's machine. Otherwise the ledger is opened and
copied directly.

connhost ledger restore DIR puts a backup back. A shared ledger on
PostgreSQL is backed up with the database's own tools.`,
		Example: `  connhost ledger backup ./backups/connhost-1
  connhost ledger backup /srv/backups/connhost-2 --server https://connhost.internal`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if _, err := os.Lstat(dir); err == nil {
				return usagef("%s exists: a backup goes into a new directory", dir)
			}
			if dsn, _, err := a.sharedLedger(); err != nil {
				return err
			} else if dsn != "" {
				return usagef("the ledger is shared on PostgreSQL: back it up with the database's own tools (pg_dump, point-in-time recovery), and use a restored copy with connhost ledger accept-restore")
			}
			var info ledger.BackupInfo
			ctx := cmd.Context()
			if si, discovered, ok := a.findServer(ctx, df); ok {
				if _, err := a.remote(ctx, df, si, discovered, request{path: "/v1/ledger/backup", body: httpapi.BackupRequest{Dir: dir}, out: &info}); err != nil {
					return err
				}
			} else {
				_, cfg, err := a.sharedLedger()
				if err != nil {
					return err
				}
				if err := mustExist("--data", a.g.data); err != nil {
					return err
				}
				quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
				db, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(a.g.data, "ledger"), WitnessPath: a.witnessPath(cfg), Logger: quiet})
				if err = lockedError(ctx, a.g.data, err); err != nil {
					return err
				}
				info, err = db.Backup(ctx, dir)
				if cerr := db.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
			}
			if a.g.json {
				writeJSON(a.stdout, info)
				return nil
			}
			fmt.Fprintf(a.stdout, "Backed up ledger %s (generation %d, at least %d committed writes) into %s at %s.\n",
				info.Identity, info.Generation, info.Position, info.Dir, info.TakenAt.Format(time.RFC3339))
			fmt.Fprintf(a.stdout, "Restore it with: connhost ledger restore %s --reason TEXT (with the server stopped).\n", info.Dir)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&df.server, "server", "", "ask the connhost server at this URL to take the backup (default: $"+ServerEnv+", else the one running on --data, found through its server.json)")
	f.StringVar(&df.tokenEnv, "token-env", DefaultTokenEnv, "environment variable holding your operator token, sent to the server")
	return c
}

func (a *app) restoreBackupCommand() *cobra.Command {
	var (
		by, reason string
		unnamed    bool
	)
	c := &cobra.Command{
		Use:   "restore DIR --reason TEXT [--by NAME]",
		Short: "Put a backup taken by connhost ledger backup back in place, fencing what it does not know",
		Long: `restore puts the backup in DIR (taken by connhost ledger backup) in place
of the ledger in --data, with no server running on it: the ledger there
and its mark are set aside (renamed with the suffix .replaced-<time>, not
deleted), the copy takes their place, and the restore is accepted as
connhost ledger accept-restore does (see its help): every execution the
backup holds unfinished, and every session the witness saw written after
the backup, becomes recovery_required for an operator to resolve, so that
nothing the ledger did after the backup runs again.

The witness stays where it is (beside --data, or [server] witness): it is
what names the sessions written after the backup. The provider emulators
of dev keep their own state in --data/sandbox, which a restore of the
ledger alone does not roll back.`,
		Example: `  connhost ledger restore ./backups/connhost-1 --by rita --reason "the disk failed at 14:02"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return usagef("restore needs --reason: it is recorded with every fence")
			}
			if by == "" {
				by = localActor()
			}
			if dsn, _, err := a.sharedLedger(); err != nil {
				return err
			} else if dsn != "" {
				return usagef("the ledger is shared on PostgreSQL: restore the database with its own tools, then run connhost ledger accept-restore")
			}
			_, cfg, err := a.sharedLedger()
			if err != nil {
				return err
			}
			if si, err := readServerInfo(a.g.data); err == nil {
				if live, _ := si.answers(cmd.Context(), 5*time.Second); live {
					return fmt.Errorf("%s runs on %s: stop it before restoring its ledger", si, a.g.data)
				}
			}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			acc := ledger.RestoreAcceptance{By: by, Reason: reason, Unnamed: unnamed}
			rep, info, err := ledger.RestoreBackup(cmd.Context(), ledger.Options{Dir: filepath.Join(a.g.data, "ledger"), WitnessPath: a.witnessPath(cfg), Logger: quiet}, args[0], acc)
			if err = lockedError(cmd.Context(), a.g.data, err); err != nil {
				return err
			}
			if a.g.json {
				writeJSON(a.stdout, struct {
					Backup  ledger.BackupInfo    `json:"backup"`
					Restore ledger.RestoreReport `json:"restore"`
				}{info, rep})
				return nil
			}
			fmt.Fprintf(a.stdout, "Restored the backup of %s (at least %d committed writes) into %s; the replaced ledger is set aside beside it.\n",
				info.TakenAt.Format(time.RFC3339), info.Position, a.g.data)
			renderRestoreReport(a.stdout, rep)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&by, "by", "", `operator name recorded with every fence (default "local:<OS user>")`)
	f.StringVar(&reason, "reason", "", "what was restored and why (required; recorded with every fence)")
	f.BoolVar(&unnamed, "accept-unnamed-sessions", false, "accept the restore even where no witness names every session written after the backup: calls of those sessions are not fenced")
	return c
}

func (a *app) acceptRestoreCommand() *cobra.Command {
	var (
		by, reason string
		peers      []string
		unnamed    bool
	)
	c := &cobra.Command{
		Use:   "accept-restore --reason TEXT [--by NAME] [--peer-witness FILE]...",
		Short: "Use a ledger restored from a backup, fencing what the backup does not know",
		Long: `accept-restore is the operator's deliberate act of using a ledger that is
behind its witness or its mark: a backup of the data directory restored in
its place, a database restored from an older dump or point in time, a
replica promoted without the last commits, tables emptied. Every other
command refuses such a ledger (exit 6), because what the backup forgot
would otherwise happen again: a call it holds approved may have run since,
and a call made after it is not in it at all, so a runtime sending that
call again would run it a second time.

accept-restore fences what the backup may have forgotten:

  - every execution the backup holds unfinished (awaiting approval,
    approved, dispatched, waiting for a retry) becomes recovery_required:
    what happened to it after the backup is unknown;
  - every session the witness saw written after the backup gets a
    recovery_required record of its own (tool connhost.restore), which
    fences the session: a call of it that the backup does not know is
    refused (session_fenced) instead of running again;
  - every console session is signed out: the backup may hold one live
    that was signed out after it.

Check each with its provider, then resolve it: connhost resolve <id>
--applied (it happened), --not-applied --retry (it did not, run it; a call
never approved cannot), or --not-applied --abandon; a session's restore
record once its calls are reconciled. Reads are left alone. The ledger
then starts a new generation, and its mark and witness record it: an older
copy restored again is refused again.

The witness names the sessions written most recently (4096 by default). If
the backup is older than the oldest of them, or there is no witness, some
sessions cannot be named: accept-restore refuses unless
--accept-unnamed-sessions, since calls of those sessions would run again.
On a fleet (--ledger, or $CONNHOST_LEDGER), every node keeps its own
witness: run it on one node with the others' witnesses (copies of their
files) in --peer-witness, or each node fences its own
sessions when it next opens the ledger (calls of them sent to other nodes
before that are not fenced). What no witness can see is not fenced either:
writes of the last second before the loss (the witness is brought up to
date about once a second), and a witness restored together with the
ledger.

A ledger that is not behind anything is left as it is. With --json it
prints what was fenced.`,
		Example: `  connhost ledger accept-restore --by rita --reason "restored the 02:00 backup after the disk failed"
  connhost ledger accept-restore --reason "restored last night's copy of .connhost" --accept-unnamed-sessions --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reason == "" {
				return usagef("accept-restore needs --reason: it is recorded with every fence")
			}
			if by == "" {
				by = localActor()
			}
			dsn, cfg, err := a.sharedLedger()
			if err != nil {
				return err
			}
			acc := ledger.RestoreAcceptance{By: by, Reason: reason, Witnesses: peers, Unnamed: unnamed}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			var rep ledger.RestoreReport
			if dsn != "" {
				if err := server.CheckDSN(dsn); err != nil {
					return err
				}
				rep, err = pgledger.AcceptRestore(cmd.Context(), pgledger.Options{DSN: dsn, ApplicationName: "connhost", Logger: quiet, WitnessPath: a.witnessPath(cfg)}, acc)
				if err != nil {
					err = fmt.Errorf("shared ledger %s: %w", server.RedactDSN(dsn), err)
				}
			} else {
				rep, err = ledger.AcceptRestore(cmd.Context(), ledger.Options{Dir: filepath.Join(a.g.data, "ledger"), WitnessPath: a.witnessPath(cfg), Logger: quiet}, acc)
				err = lockedError(cmd.Context(), a.g.data, err)
			}
			switch {
			case errors.Is(err, ledger.ErrNoLedger):
				return fmt.Errorf("no ledger in %s (nor a mark or a witness that names one): nothing to accept", a.g.data)
			case err != nil:
				return err
			}
			if a.g.json {
				writeJSON(a.stdout, rep)
				return nil
			}
			renderRestoreReport(a.stdout, rep)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&by, "by", "", `operator name recorded with every fence (default "local:<OS user>")`)
	f.StringVar(&reason, "reason", "", "what was restored and why (required; recorded with every fence)")
	f.StringSliceVar(&peers, "peer-witness", nil, "another writer's witness file (a copy of another fleet node's), whose sessions are fenced too; repeatable")
	f.BoolVar(&unnamed, "accept-unnamed-sessions", false, "accept the restore even where no witness names every session written after the backup: calls of those sessions are not fenced")
	return c
}

// renderRestoreReport writes what accept-restore found and fenced.
func renderRestoreReport(w io.Writer, rep ledger.RestoreReport) {
	if !rep.Accepted {
		fmt.Fprintf(w, "Nothing to accept: the ledger %s (%s) is not behind its mark or its witness; nothing was changed.\n", rep.Ledger, rep.Identity)
		return
	}
	fmt.Fprintf(w, "Accepted the restored ledger %s (%s), now at generation %d.\n", rep.Ledger, rep.Identity, rep.Generation)
	for _, b := range rep.Behind {
		fmt.Fprintf(w, "It was behind: %s.\n", b)
	}
	fmt.Fprintf(w, "Restored position %d; the deployment had seen %d.\n", rep.RestoredPosition, rep.WitnessedPosition)
	fmt.Fprintf(w, "\n%d unfinished execution(s) fenced (recovery_required; what happened to them after the backup is unknown):\n", len(rep.Executions))
	for _, e := range rep.Executions {
		fmt.Fprintf(w, "  %s  %s  %s  was %s\n", e.ID, sessionName(e.Namespace, e.SessionID), e.Tool, e.Was)
	}
	fmt.Fprintf(w, "\n%d session(s) written after the backup fenced, each by a record of its own:\n", len(rep.Sessions))
	for _, s := range rep.Sessions {
		fmt.Fprintf(w, "  %s  %s  last written at %d\n", s.ExecutionID, sessionName(s.Namespace, s.SessionID), s.LastWrite)
	}
	if rep.Unnamed {
		fmt.Fprintln(w, "\nNot every session written after the backup could be named (--accept-unnamed-sessions): calls of the others are not fenced.")
	}
	fmt.Fprintln(w, "\nCheck each with its provider (connhost history <id>), then connhost resolve <id> --applied,")
	fmt.Fprintln(w, "--not-applied --retry or --not-applied --abandon; until then their sessions stay fenced.")
}
