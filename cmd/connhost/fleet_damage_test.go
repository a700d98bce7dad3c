//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/testing/testenv"
)

// answers counts the answers of a running node, by status and problem
// code ("200", "503 ledger_damaged").
type answers map[string]int

func (a answers) String() string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s ×%d; ", k, a[k])
	}
	return b.String()
}

// ask sends one request and counts its answer.
func (a answers) ask(t *testing.T, method, url, body string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a["no answer"]++
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	key := fmt.Sprint(resp.StatusCode)
	var p struct{ Code string }
	if resp.StatusCode >= 400 && json.Unmarshal(b, &p) == nil {
		key += " " + p.Code
	}
	a[key]++
}

// TestFleetRollbackAnswersLedgerDamaged empties, drops or rolls back (an
// older pg_dump restored) a shared ledger's database under a running node (`connhost dev --ledger`) and
// asks it for the calls it ran and for new ones at once, every 20 ms for
// three seconds. Before, the node answered 500 internal from the moment
// its witness check saw the rollback until its lease lapsed (503
// unavailable after that); now it answers 503 ledger_damaged, never 500,
// and runs nothing.
func TestFleetRollbackAnswersLedgerDamaged(t *testing.T) {
	ctx := context.Background()
	r := newRestoreRig(t)
	for _, tc := range []struct{ name, sql string }{
		{"executions truncated", `TRUNCATE connhost_executions, connhost_pending, connhost_sessions`},
		{"every table truncated", `TRUNCATE connhost_executions, connhost_pending, connhost_sessions, connhost_nodes, connhost_ledger, connhost_restores, connhost_intent_locks`},
		{"tables dropped", `DROP TABLE connhost_executions, connhost_pending, connhost_sessions, connhost_nodes, connhost_ledger, connhost_restores, connhost_intent_locks`},
		{"an older dump restored", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.ledger = testenv.NewPostgresDatabase(t)
			data := filepath.Join(r.dir, strings.ReplaceAll(tc.name, " ", "-"))
			dev, api := startDamagedDev(t, r.bin, r.devArgs(data))
			var dump []byte
			if tc.sql == "" {
				var err error
				if dump, err = testenv.DumpDSN(ctx, r.ledger); err != nil {
					t.Fatal(err)
				}
			}
			c := call{"s-" + tc.name, "call_1", "effect.plain"}
			id := runCall(t, api, c).ExecutionID
			waitProbe(t, data+".witness", id, 2)
			var err error
			if tc.sql == "" {
				err = testenv.RestoreDSN(ctx, r.ledger, dump)
			} else {
				err = testenv.ExecDSN(ctx, r.ledger, tc.sql)
			}
			if err != nil {
				t.Fatal(err)
			}
			got := answers{}
			for i := range 150 {
				got.ask(t, "GET", api+"/v1/executions/"+id, "")
				got.ask(t, "POST", api+"/v1/executions", call{fmt.Sprint("new-", i), "call_1", "effect.plain"}.body())
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("%s: %s", tc.name, got)
			for k := range got {
				if strings.HasPrefix(k, "500") {
					t.Errorf("%s: answered %s (%d times); all: %s", tc.name, k, got[k], got)
				}
			}
			if got["503 ledger_damaged"] == 0 {
				t.Errorf("%s: never answered 503 ledger_damaged: %s", tc.name, got)
			}
			if n := r.effectsOf(id); n != 1 {
				t.Errorf("%s: the call ran %d times", tc.name, n)
			}
			dev.Kill()
		})
	}
}
