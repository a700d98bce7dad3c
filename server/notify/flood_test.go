package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// nsReceiver is a webhook receiver that counts, per namespace, the bytes
// and the notices it received, in the order they arrived.
type nsReceiver struct {
	mu    sync.Mutex
	bytes map[string]int
	got   []map[string]any // each body's data, with its type as "type"
	delay time.Duration
}

func (r *nsReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var body struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	time.Sleep(r.delay)
	body.Data["type"] = body.Type
	body.Data["arrived"] = time.Now()
	ns, _ := body.Data["namespace"].(string)
	r.mu.Lock()
	r.bytes[ns] += len(b)
	r.got = append(r.got, body.Data)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *nsReceiver) snapshot() (map[string]int, []map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	bytes := map[string]int{}
	for k, v := range r.bytes {
		bytes[k] = v
	}
	return bytes, append([]map[string]any(nil), r.got...)
}

// told sums what the receiver was told of namespace ns: notices one by
// one, plus those a summary counts.
func told(got []map[string]any, ns string) (single, coalesced int) {
	for _, d := range got {
		if d["namespace"] != ns {
			continue
		}
		if c, ok := d["coalesced"].(map[string]any); ok {
			for _, v := range c {
				f, _ := v.(float64)
				coalesced += int(f)
			}
			continue
		}
		single++
	}
	return single, coalesced
}

// TestFloodTellsEveryTenant: tenant-b's 600 calls that await approval,
// told to the notifier at once (far faster than a healthy receiver takes
// them), neither push tenant-a's one notice out nor delay it behind
// tenant-b's queue: it arrives within a delivery of being queued.
// tenant-b's notices beyond its queue are not lost: a real HTTP receiver
// is told every one of the 600, one by one or counted in the summary that
// follows once tenant-b's queue has drained ("N calls await approval in
// namespace tenant-b").
func TestFloodTellsEveryTenant(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"healthy receiver", 0}, {"slow receiver", 5 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := &nsReceiver{bytes: map[string]int{}, delay: tc.delay}
			srv := httptest.NewServer(rcv)
			defer srv.Close()
			wh, err := NewWebhook(WebhookOptions{URL: srv.URL + "/hook", Key: testKey(t)})
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			n, err := New(Options{Registry: reg, PublicURL: "https://connhost.example.com"}, wh)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); n.Wait() }()
			n.Start(ctx)

			notice := func(ns string, i int) Notice {
				no := approvalNotice()
				no.Namespace, no.ExecutionID, no.ApprovalID = ns, fmt.Sprintf("ex_%s_%d", ns, i), fmt.Sprintf("ap_%s_%d", ns, i)
				no.Since = no.Since.Add(time.Duration(i) * time.Millisecond)
				return no
			}
			const flood = 600
			start := time.Now()
			for i := range flood {
				n.Notify(notice("tenant-b", i))
			}
			_, before := rcv.snapshot()
			queuedAt := time.Now()
			n.Notify(notice("tenant-a", 0))

			deadline := time.Now().Add(60 * time.Second)
			var got []map[string]any
			var bytes map[string]int
			for {
				bytes, got = rcv.snapshot()
				single, coalesced := told(got, "tenant-b")
				a, _ := told(got, "tenant-a")
				if a == 1 && single+coalesced >= flood {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 60 s the receiver was told %d of tenant-a's 1 notice and %d (+%d coalesced) of tenant-b's %d", a, single, coalesced, flood)
				}
				time.Sleep(10 * time.Millisecond)
			}
			aAt := -1
			for i, d := range got {
				if d["namespace"] == "tenant-a" {
					aAt = i
				}
			}
			single, coalesced := told(got, "tenant-b")
			var aWait time.Duration
			if aAt >= 0 {
				aWait = got[aAt]["arrived"].(time.Time).Sub(queuedAt)
			}
			t.Logf("tenant-b: %d notices one by one + %d in a summary, %d bytes; tenant-a: %d bytes, its notice delivered %d-th (%d of tenant-b's had arrived when it was queued), %v after it was queued; all told in %v",
				single, coalesced, bytes["tenant-b"], bytes["tenant-a"], aAt+1, len(before), aWait.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			if single+coalesced != flood {
				t.Errorf("tenant-b's %d notices were told as %d one by one and %d coalesced", flood, single, coalesced)
			}
			if aAt-len(before) > 1 {
				t.Errorf("tenant-a's notice arrived after %d more of tenant-b's, want at most the one in flight", aAt-len(before))
			}
			last := got[len(got)-1]
			if coalesced > 0 && (last["type"] != TypeCoalesced || last["console_url"] != "https://connhost.example.com/ui/approvals?namespace=tenant-b") {
				t.Errorf("the summary comes last, linking to tenant-b's inbox: %v", last)
			}
			if c := count(t, reg, "coalesced"); int(c) != coalesced {
				t.Errorf("coalesced counted %v, the summary says %d", c, coalesced)
			}
		})
	}
}
