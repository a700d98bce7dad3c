package wasmrt

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/connhost/connhost/devkit/testing/testenv"
)

// logCounter is an Observer that sums GuestLogDropped.
type logCounter struct {
	nopObserver
	mu             sync.Mutex
	records, bytes int64
	reports        int
}

func (o *logCounter) GuestLogDropped(connector string, records, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.records += records
	o.bytes += bytes
	o.reports++
}

func (o *logCounter) get() (records, bytes int64, reports int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.records, o.bytes, o.reports
}

// logLines splits a JSON log into guest records and the executor's other
// records.
type logLines struct {
	guest  []map[string]any
	others []map[string]any
	size   int
}

func parseLogs(t *testing.T, logs *testenv.LogBuffer) logLines {
	t.Helper()
	var out logLines
	s := logs.String()
	out.size = len(s)
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["source"] == "guest" {
			out.guest = append(out.guest, rec)
		} else {
			out.others = append(out.others, rec)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (l logLines) guestBytes() int {
	n := 0
	for _, r := range l.guest {
		n += len(r["msg"].(string))
	}
	return n
}

func (l logLines) find(msg string) map[string]any {
	for _, r := range l.others {
		if r["msg"] == msg {
			return r
		}
	}
	return nil
}

const overBudget = "guest log over budget: records dropped or cut"

// TestGuestLogBudget: a connector that logs in a loop gets at most
// limits.log_records records and limits.log_kib KiB into the host's log
// per call; the rest is dropped, reported by one warning and counted by
// the Observer.
func TestGuestLogBudget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		records, size int
		wantLogged    int   // guest records that reach the log
		wantDropped   int64 // records dropped
		wantCut       bool  // the last logged record is cut
	}{
		// 1,000 records of 16 KiB (16 MiB) against a 4 KiB budget: the
		// first record is cut to 4 KiB, the other 999 are dropped.
		{name: "big records", records: 1000, size: 16 << 10, wantLogged: 1, wantDropped: 999, wantCut: true},
		// 1,000 small records against a 10-record budget.
		{name: "many records", records: 1000, size: 100, wantLogged: 10, wantDropped: 990},
		// 5 records of 1000 bytes: the fifth crosses 4 KiB and is cut.
		{name: "crossing record", records: 5, size: 1000, wantLogged: 5, wantDropped: 0, wantCut: true},
		{name: "within budget", records: 3, size: 100, wantLogged: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &logCounter{}
			rt, logs := newTestRuntime(t, Options{Observer: obs})
			m, lo := testManifest(t, "chatty", "logflood", ops("log"))
			m.Limits.LogKiB, m.Limits.LogRecords = 4, 10
			c := mustLoad(t, rt, m, lo)
			args, _ := json.Marshal(map[string]int{"records": tc.records, "size": tc.size})
			if _, err := c.Call(context.Background(), execute("log", string(args))); err != nil {
				t.Fatal(err)
			}
			l := parseLogs(t, logs)
			if len(l.guest) != tc.wantLogged || l.guestBytes() > 4<<10 {
				t.Fatalf("%d guest records (%d bytes) reached the log, want %d records within 4 KiB", len(l.guest), l.guestBytes(), tc.wantLogged)
			}
			// Everything the call wrote to the log, records and their
			// attributes, stays near the budget (the flood was 16 MiB).
			if l.size > 4<<10+tc.wantLogged*512+1024 {
				t.Fatalf("log holds %d bytes", l.size)
			}
			totalAsked := int64(tc.records * tc.size)
			wantBytes := totalAsked - int64(l.guestBytes())
			last := l.guest[len(l.guest)-1]
			_, cut := last["truncated_from"]
			if cut != tc.wantCut {
				t.Fatalf("last record cut = %v, want %v (%v)", cut, tc.wantCut, last)
			}
			if cut && last["truncated_from"].(float64) != float64(tc.size) {
				t.Fatalf("truncated_from = %v, want %d", last["truncated_from"], tc.size)
			}
			records, bytes, reports := obs.get()
			warn := l.find(overBudget)
			if wantBytes == 0 {
				if reports != 0 || warn != nil {
					t.Fatalf("within budget: %d observer reports, warning %v", reports, warn)
				}
				return
			}
			if reports != 1 || records != tc.wantDropped || bytes != wantBytes {
				t.Fatalf("observer: %d reports, %d records, %d bytes; want 1, %d, %d", reports, records, bytes, tc.wantDropped, wantBytes)
			}
			if warn == nil {
				t.Fatalf("no %q warning in %v", overBudget, l.others)
			}
			if warn["level"] != "WARN" || warn["connector"] != "chatty" || warn["operation"] != "log" ||
				warn["dropped_records"].(float64) != float64(tc.wantDropped) || warn["dropped_bytes"].(float64) != float64(wantBytes) {
				t.Fatalf("warning %v", warn)
			}
			if n := len(l.others); n != 1 {
				t.Fatalf("%d non-guest records, want the one warning: %v", n, l.others)
			}
		})
	}
}

// TestGuestLogBudgetPerCall: the budget is per call; a second call on the
// same instance logs again.
func TestGuestLogBudgetPerCall(t *testing.T) {
	obs := &logCounter{}
	rt, logs := newTestRuntime(t, Options{Observer: obs})
	m, lo := testManifest(t, "chatty", "logflood", ops("log"))
	m.Limits.LogKiB, m.Limits.LogRecords, m.Limits.Instances = 4, 10, 1
	c := mustLoad(t, rt, m, lo)
	for range 3 {
		if _, err := c.Call(context.Background(), execute("log", `{"records":20,"size":10}`)); err != nil {
			t.Fatal(err)
		}
	}
	l := parseLogs(t, logs)
	if len(l.guest) != 30 {
		t.Fatalf("%d guest records, want 10 per call", len(l.guest))
	}
	if records, _, reports := obs.get(); records != 30 || reports != 3 {
		t.Fatalf("observer: %d records in %d reports, want 30 in 3", records, reports)
	}
}

// TestGuestLogFloodUntilDeadline is the loop the budget exists for: 16 KiB
// records until the deadline cuts the call. The host's log holds the
// budget and one warning; the call is a timeout like any other.
func TestGuestLogFloodUntilDeadline(t *testing.T) {
	obs := &logCounter{}
	rt, logs := newTestRuntime(t, Options{Observer: obs})
	m, lo := testManifest(t, "chatty", "logflood", ops("forever"))
	m.Limits.Timeout = 300 * time.Millisecond
	c := mustLoad(t, rt, m, lo)
	_, err := c.Call(context.Background(), execute("forever", `{"size":16384}`))
	wantCallError(t, err, "chatty", "forever", KindTimeout)
	l := parseLogs(t, logs)
	if len(l.guest) > DefaultLogRecords || l.guestBytes() > DefaultLogKiB<<10 {
		t.Fatalf("%d guest records, %d bytes reached the log; want at most %d records, %d KiB", len(l.guest), l.guestBytes(), DefaultLogRecords, DefaultLogKiB)
	}
	records, bytes, reports := obs.get()
	if reports != 1 || records == 0 || bytes < records*16384 {
		t.Fatalf("observer: %d reports, %d records, %d bytes", reports, records, bytes)
	}
	if l.find(overBudget) == nil || l.find("connector instance discarded") == nil {
		t.Fatalf("want the budget warning and the discard: %v", l.others)
	}
	t.Logf("%d records (%d bytes) dropped in %v; %d bytes reached the log", records, bytes, m.Limits.Timeout, l.size)
}

// TestGuestLogCutKeepsUTF8: a record cut inside a multi-byte rune loses
// the partial rune instead of logging invalid UTF-8.
func TestGuestLogCutKeepsUTF8(t *testing.T) {
	rt, logs := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "probe", "httpprobe", ops("log"))
	m.Limits.LogKiB = 1
	c := mustLoad(t, rt, m, lo)
	// 1 + 2·3000 bytes: the 1 KiB cut falls inside an "é".
	msg := "a" + strings.Repeat("é", 3000)
	args, _ := json.Marshal(map[string]string{"msg": msg})
	if _, err := c.Call(context.Background(), execute("log", string(args))); err != nil {
		t.Fatal(err)
	}
	l := parseLogs(t, logs)
	if len(l.guest) != 1 {
		t.Fatalf("%d guest records", len(l.guest))
	}
	got := l.guest[0]["msg"].(string)
	if got != msg[:1023] || !utf8.ValidString(got) {
		t.Fatalf("cut record is %d bytes (%q…), want the first 1023", len(got), got[max(0, len(got)-8):])
	}
}

// TestGuestStdioNeverReachesTheHost: a guest printing megabytes to stdout
// and stderr leaves the host's log untouched, and the stderr capture kept
// for failure messages stays at its cap.
func TestGuestStdioNeverReachesTheHost(t *testing.T) {
	rt, logs := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "chatty", "logflood", ops("stdio"))
	m.Limits.Instances = 1
	c := mustLoad(t, rt, m, lo)
	out, err := c.Call(context.Background(), execute("stdio", `{"records":4096,"size":1024}`))
	if err != nil || string(out.Result) != `{"written":4096}` {
		t.Fatalf("call: %s %v", out.Result, err)
	}
	if strings.Contains(logs.String(), "record ") {
		t.Fatalf("guest output reached the log: %.200s", logs.String())
	}
	inst, err := c.pool.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.pool.put(inst)
	inst.stderr.mu.Lock()
	n := len(inst.stderr.buf)
	inst.stderr.mu.Unlock()
	if n != stderrCap {
		t.Fatalf("stderr capture holds %d bytes, want its cap %d", n, stderrCap)
	}
}
