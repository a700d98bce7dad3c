package connector

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/abi/guest/guesttest"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/manifests/manifesttest"

	"example.com/webhook/provider"
)

const args = `{"topic":"order.paid","payload":{"order":"o_1","total":500}}`

func init() { Register(Honest) }

func host(t *testing.T) (*provider.Server, *guesttest.Host) {
	t.Helper()
	p := provider.New()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, guesttest.New(srv.URL, map[string]string{"base_url": srv.URL})
}

// TestDeliverOncePerKey: two attempts with the host's key deliver once.
func TestDeliverOncePerKey(t *testing.T) {
	p, h := host(t)
	a := guest.Invoke(h, abi.ExportExecuteWithKey, "deliver", "key-1", []byte(args))
	b := guest.Invoke(h, abi.ExportExecuteWithKey, "deliver", "key-1", []byte(args))
	if a.Kind != abi.OutcomeOK || b.Kind != abi.OutcomeOK || a.Receipt != b.Receipt {
		t.Fatalf("%+v, %+v", a, b)
	}
	if n := len(p.Deliveries()); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
	if o := guest.Invoke(h, abi.ExportReconcile, "deliver", "key-1", []byte(args)); o.Kind != abi.OutcomeApplied || o.Receipt != a.Receipt {
		t.Fatalf("reconcile after: %+v", o)
	}
	if o := guest.Invoke(h, abi.ExportReconcile, "deliver", "key-2", []byte(args)); o.Kind != abi.OutcomeNotApplied {
		t.Fatalf("reconcile of another key: %+v", o)
	}
	got := guest.Invoke(h, abi.ExportExecute, "get_delivery", "", []byte(`{"id":"`+a.Receipt+`"}`))
	if got.Kind != abi.OutcomeOK || got.Receipt != a.Receipt {
		t.Fatalf("get_delivery: %+v", got)
	}
	if o := guest.Invoke(h, abi.ExportExecuteWithKey, "deliver", "key-3", []byte(`{"topic":"t","payload":{},"idempotency_key":"x"}`)); o.Kind != abi.OutcomePermanent {
		t.Errorf("a key smuggled into the arguments: %+v", o)
	}
}

func TestDeniedIsPermanent(t *testing.T) {
	h := guesttest.New("https://hooks.example.com:443", map[string]string{"base_url": "http://127.0.0.1:9"})
	if o := guest.Invoke(h, abi.ExportExecuteWithKey, "deliver", "k", []byte(args)); o.Kind != abi.OutcomePermanent || !strings.Contains(o.Error, "allowlist") {
		t.Fatalf("%+v", o)
	}
}

func TestManifest(t *testing.T) {
	m, err := manifests.Load(filepath.Join("..", "manifests", "webhook.toml"))
	if err != nil {
		t.Fatal(err)
	}
	manifesttest.CheckManifest(t, m, guest.Describe())
}
