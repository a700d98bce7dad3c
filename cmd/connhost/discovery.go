package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// serverInfoFile is the discovery file serve and dev keep in the data
// directory while they run: the ledger is locked by them, and the CLI's
// decision commands (approve, reject, resolve, cancel) go through their API
// instead.
const serverInfoFile = "server.json"

// serverInfo is the content of the discovery file. It holds no secret,
// and it is no credential either: the CLI trusts a server it names only
// after checking the file (this user's, mode 0600, see openOwnFile), the
// process (checkServerProcess) and, before it sends a token, the server's
// proof that it holds that token (see remote.go).
type serverInfo struct {
	// URL is the API's base URL, reachable from this machine.
	URL string `json:"url"`
	// PID is the server's process id.
	PID int `json:"pid"`
	// Command is "serve" or "dev".
	Command string `json:"command"`
	// Auth: requests need a bearer token.
	Auth    bool      `json:"auth"`
	Started time.Time `json:"started"`
}

// String names the server for people: "connhost serve (pid 4242) at URL".
func (si serverInfo) String() string {
	return fmt.Sprintf("connhost %s (pid %d) at %s", si.Command, si.PID, si.URL)
}

// writeServerInfo writes the discovery file into dataDir, mode 0600
// (atomically: a reader sees the old file or the new one) and returns the
// function that removes it on shutdown. A server killed without a shutdown leaves a
// stale file behind; readers tell it by its pid and by asking its URL.
func writeServerInfo(dataDir string, si serverInfo) (remove func(), err error) {
	b, err := json.MarshalIndent(si, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dataDir, serverInfoFile)
	tmp, err := os.CreateTemp(dataDir, serverInfoFile+".*")
	if err != nil {
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	// CreateTemp made it 0600, which readers require.
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return nil, fmt.Errorf("discovery file: %w", err)
	}
	return func() {
		// Only our own: never a successor's.
		if cur, err := readServerInfo(dataDir); err == nil && cur.PID == si.PID {
			_ = os.Remove(path)
		}
	}, nil
}

// readServerInfo reads the discovery file of dataDir; an error wrapping
// fs.ErrNotExist means no server announced itself, an
// *untrustedFileError a file that no server of this user wrote.
func readServerInfo(dataDir string) (serverInfo, error) {
	var si serverInfo
	path := filepath.Join(dataDir, serverInfoFile)
	f, err := openOwnFile(path, dataDir)
	if err != nil {
		return si, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return si, fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(b, &si); err != nil {
		return si, fmt.Errorf("%s: %w", path, err)
	}
	if si.URL == "" || si.PID <= 0 {
		return si, fmt.Errorf("%s: no url or pid", path)
	}
	return si, nil
}

// untrustedFileError is a discovery file the CLI refuses to follow.
type untrustedFileError struct {
	Path string
	Why  string
}

func (e *untrustedFileError) Error() string {
	return fmt.Sprintf("%s was not written by a connhost server of yours (%s; serve and dev write it mode 0600 in a directory only you can write): remove it, and use --server URL to reach a server", e.Path, e.Why)
}

// answers reports whether the server of si is alive, is the process the
// file says (checkServerProcess) and answers GET /healthz (which needs no
// token) within timeout. A dead pid is a stale file (why is ""); a live
// pid that is not that server (why says what it is) may be a reused pid
// or a file someone wrote to have the CLI talk to their process.
func (si serverInfo) answers(ctx context.Context, timeout time.Duration) (ok bool, why string) {
	if !processAlive(si.PID) {
		return false, ""
	}
	if err := checkServerProcess(si.PID, si.URL); err != nil {
		return false, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", si.URL+"/healthz", nil)
	if err != nil {
		return false, err.Error()
	}
	client, err := cliClient()
	if err != nil {
		return false, err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, "it does not answer: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, "its /healthz answers " + resp.Status
	}
	return true, ""
}

// ledgerLockPath is Pebble's lock file of the ledger in dataDir (host.Open
// keeps the ledger in dataDir/ledger).
func ledgerLockPath(dataDir string) string { return filepath.Join(dataDir, "ledger", "LOCK") }

// ledgerLockedError reports that another process holds the ledger. PID is
// 0 when the holder is not known; Server is the discovery file's content
// when there was one, and Answers whether that server answered.
type ledgerLockedError struct {
	DataDir string
	PID     int
	Server  *serverInfo
	Answers bool
	// Ignored says why a server.json that is there was not followed.
	Ignored string
	// Hint says what to do instead (set by the decision commands).
	Hint string
	Err  error
}

func (e *ledgerLockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	info := filepath.Join(e.DataDir, serverInfoFile)
	var msg string
	switch {
	case e.Server != nil && e.Answers && (e.PID == 0 || e.PID == e.Server.PID):
		msg = fmt.Sprintf("the ledger in %s is in use by %s", e.DataDir, e.Server)
	case e.Server != nil && e.Answers:
		msg = fmt.Sprintf("the ledger in %s is in use by %s (%s names %s)", e.DataDir, holder, info, e.Server)
	case e.Server != nil:
		msg = fmt.Sprintf("the ledger in %s is in use by %s; %s names %s, which does not answer", e.DataDir, holder, info, e.Server)
	case e.Ignored != "":
		msg = fmt.Sprintf("the ledger in %s is in use by %s, which announced no API that can be trusted (%s)", e.DataDir, holder, e.Ignored)
	default:
		msg = fmt.Sprintf("the ledger in %s is in use by %s, which announced no API (no %s)", e.DataDir, holder, info)
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *ledgerLockedError) Unwrap() error { return e.Err }

// lockedError turns an error of opening the ledger in dataDir into a
// *ledgerLockedError when it is the ledger's lock refusing this process,
// and returns err unchanged otherwise.
func lockedError(ctx context.Context, dataDir string, err error) error {
	if !isLockConflict(err) {
		return err
	}
	le := &ledgerLockedError{DataDir: dataDir, PID: lockHolder(ledgerLockPath(dataDir)), Err: err}
	si, rerr := readServerInfo(dataDir)
	var ue *untrustedFileError
	switch {
	case rerr == nil:
		le.Server = &si
		le.Answers, _ = si.answers(ctx, 2*time.Second)
	case errors.As(rerr, &ue):
		le.Ignored = ue.Error()
	}
	return le
}
