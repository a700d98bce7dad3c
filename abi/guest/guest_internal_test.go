package guest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
)

// isolateRegistry gives the test an empty operation registry and restores
// the package-global one (including anything examples registered) when the
// test ends.
func isolateRegistry(t *testing.T) {
	t.Helper()
	savedRegistry, savedOrder := registry, order
	registry, order = map[string]Operation{}, nil
	t.Cleanup(func() { registry, order = savedRegistry, savedOrder })
}

// fakeHost records what a handler asked of the host.
type fakeHost struct {
	execID   string
	config   map[string]string
	statuses map[string]int32 // non-zero Config status per key
	resp     abi.HTTPResponse
	reqs     []abi.HTTPRequest
	logs     []string
	now      time.Time
	slept    []time.Duration
	sleepOK  bool
}

func (h *fakeHost) ExecutionID() string { return h.execID }
func (h *fakeHost) Config(key string) (string, int32) {
	if st, ok := h.statuses[key]; ok {
		return "", st
	}
	return h.config[key], 0
}
func (h *fakeHost) HTTP(req abi.HTTPRequest) abi.HTTPResponse {
	h.reqs = append(h.reqs, req)
	return h.resp
}
func (h *fakeHost) Log(level int32, msg string) {
	h.logs = append(h.logs, map[int32]string{abi.LevelDebug: "debug", abi.LevelInfo: "info", abi.LevelWarn: "warn", abi.LevelError: "error"}[level]+" "+msg)
}
func (h *fakeHost) Now() time.Time { return h.now }
func (h *fakeHost) Sleep(d time.Duration) bool {
	h.slept = append(h.slept, d)
	return h.sleepOK
}

func handlerReturning(o abi.Outcome) Handler { return func(*Call, []byte) abi.Outcome { return o } }

func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}

func TestRegisterPanicsOnProgrammingErrors(t *testing.T) {
	h := handlerReturning(OK(nil, ""))
	tests := []struct {
		name      string
		before    []Operation // registered successfully first
		register  []Operation
		wantPanic string
	}{
		{"operation without a name", nil, []Operation{{Execute: h}}, "guest: Register: operation without a name"},
		{"operation without handlers", nil, []Operation{{Name: "a"}}, `guest: Register: operation "a" has neither Execute nor ExecuteWithKey`},
		{"reconcile alone is not enough", nil, []Operation{{Name: "a", Reconcile: h}}, `operation "a" has neither Execute nor ExecuteWithKey`},
		{"duplicate in one call", nil, []Operation{{Name: "a", Execute: h}, {Name: "a", ExecuteWithKey: h}}, `guest: Register: operation "a" registered twice`},
		{"duplicate across calls", []Operation{{Name: "a", Execute: h}}, []Operation{{Name: "a", Execute: h}}, `operation "a" registered twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			isolateRegistry(t)
			Register(tc.before...)
			if got := panicMessage(func() { Register(tc.register...) }); got != tc.wantPanic && !strings.Contains(got, tc.wantPanic) {
				t.Fatalf("panic = %q, want %q", got, tc.wantPanic)
			}
		})
	}
}

func TestRegisterAcceptsEachSingleEntryPoint(t *testing.T) {
	isolateRegistry(t)
	h := handlerReturning(OK(nil, ""))
	if msg := panicMessage(func() {
		Register(Operation{Name: "execute_only", Execute: h}, Operation{Name: "with_key_only", ExecuteWithKey: h})
	}); msg != "" {
		t.Fatalf("Register panicked: %s", msg)
	}
}

func TestDescribeListsOperationsInRegistrationOrderWithTheirEntryPoints(t *testing.T) {
	isolateRegistry(t)
	h := handlerReturning(OK(nil, ""))
	Register(
		Operation{Name: "zeta", Execute: h},
		Operation{Name: "alpha", ExecuteWithKey: h, Reconcile: h},
	)
	Register(Operation{Name: "mid", Execute: h, ExecuteWithKey: h, Reconcile: h})
	want := abi.Description{ABI: abi.Version, Operations: []abi.OperationInfo{
		{Name: "zeta", Execute: true},
		{Name: "alpha", ExecuteWithKey: true, Reconcile: true},
		{Name: "mid", Execute: true, ExecuteWithKey: true, Reconcile: true},
	}}
	got := Describe()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Describe() = %+v, want %+v", got, want)
	}
	// What the connhost_describe export publishes is what the host accepts.
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	back, err := abi.DecodeDescription(b)
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("DecodeDescription(%s) = %+v, %v; want %+v", b, back, err, want)
	}
}

func TestDescribeWithoutOperationsListsAnEmptyArray(t *testing.T) {
	isolateRegistry(t)
	b, err := json.Marshal(Describe())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"abi":1,"operations":[]}`; string(b) != want {
		t.Fatalf("Describe() = %s, want %s", b, want)
	}
}

func TestInvokeDispatchesEachExportToItsHandler(t *testing.T) {
	isolateRegistry(t)
	// Each handler reports which entry point ran and what Call it saw.
	record := func(entry string) Handler {
		return func(c *Call, args []byte) abi.Outcome {
			return OK(map[string]string{"entry": entry, "op": c.Operation, "key": c.Key, "args": string(args)}, "")
		}
	}
	Register(Operation{Name: "pay", Execute: record("execute"), ExecuteWithKey: record("execute_with_key"), Reconcile: record("reconcile")})
	tests := []struct {
		export, key, want string
	}{
		{abi.ExportExecute, "", `{"args":"{\"n\":1}","entry":"execute","key":"","op":"pay"}`},
		{abi.ExportExecuteWithKey, "k-1", `{"args":"{\"n\":1}","entry":"execute_with_key","key":"k-1","op":"pay"}`},
		{abi.ExportReconcile, "k-1", `{"args":"{\"n\":1}","entry":"reconcile","key":"k-1","op":"pay"}`},
	}
	for _, tc := range tests {
		t.Run(tc.export, func(t *testing.T) {
			o := Invoke(&fakeHost{}, tc.export, "pay", tc.key, []byte(`{"n":1}`))
			if o.Kind != abi.OutcomeOK || string(o.Result) != tc.want {
				t.Fatalf("Invoke = %v %s (error %q), want ok %s", o.Kind, o.Result, o.Error, tc.want)
			}
		})
	}
}

func TestInvokeRefusesWhatIsNotRegistered(t *testing.T) {
	isolateRegistry(t)
	Register(Operation{Name: "read", Execute: handlerReturning(OK(nil, ""))})
	tests := []struct {
		name, export, op, wantErr string
	}{
		{"unknown operation", abi.ExportExecute, "write", `guest: unknown operation "write"`},
		{"operation names are case-sensitive", abi.ExportExecute, "READ", `guest: unknown operation "READ"`},
		{"execute_with_key not implemented", abi.ExportExecuteWithKey, "read", `guest: operation "read" does not implement connhost_execute_with_key`},
		{"reconcile not implemented", abi.ExportReconcile, "read", `guest: operation "read" does not implement connhost_reconcile`},
		{"unsupported export", abi.ExportDescribe, "read", `guest: operation "read" does not implement connhost_describe`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// reconcile must answer with a reconcile kind: not being able to
			// reconcile is "unknown", never a proof of "not applied".
			want := abi.OutcomePermanent
			if tc.export == abi.ExportReconcile {
				want = abi.OutcomeUnknown
			}
			o := Invoke(&fakeHost{}, tc.export, tc.op, "k", nil)
			if o.Kind != want || o.Error != tc.wantErr {
				t.Fatalf("Invoke = %v %q, want %v %q", o.Kind, o.Error, want, tc.wantErr)
			}
		})
	}
}

type unmarshalable struct{ C chan int }

func TestOKAndAppliedEncodeTheResult(t *testing.T) {
	type receipt struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	tests := []struct {
		name       string
		result     any
		wantResult string // "" means nil
	}{
		{"bytes are taken as encoded JSON", []byte(`{"id":"x"}`), `{"id":"x"}`},
		{"raw message is taken as encoded JSON", json.RawMessage(`[1,2]`), `[1,2]`},
		{"struct is marshalled", receipt{ID: "pi_1", Amount: 100}, `{"id":"pi_1","amount":100}`},
		{"string is marshalled, not taken raw", "hi", `"hi"`},
		{"nil means no result", nil, ""},
	}
	for _, ctor := range []struct {
		name string
		fn   func(any, string) abi.Outcome
		kind abi.OutcomeKind
	}{{"OK", OK, abi.OutcomeOK}, {"Applied", Applied, abi.OutcomeApplied}} {
		for _, tc := range tests {
			t.Run(ctor.name+"/"+tc.name, func(t *testing.T) {
				o := ctor.fn(tc.result, "rcpt")
				if o.Kind != ctor.kind || o.Receipt != "rcpt" || o.Error != "" {
					t.Fatalf("%s = %+v, want kind %v receipt rcpt and no error", ctor.name, o, ctor.kind)
				}
				if tc.wantResult == "" {
					if o.Result != nil {
						t.Fatalf("Result = %q, want nil", o.Result)
					}
				} else if string(o.Result) != tc.wantResult {
					t.Fatalf("Result = %s, want %s", o.Result, tc.wantResult)
				}
				// The envelope the SDK produces is one the host decodes.
				if _, err := abi.DecodeOutcome(o.AppendBinary(nil)); err != nil {
					t.Fatalf("host would refuse the outcome: %v", err)
				}
			})
		}
	}
}

// TestOKAndAppliedWithUnmarshalableResultTrap: OK and Applied run after the
// effect happened, so a result json.Marshal refuses must not become an error
// outcome (the host would record "did not happen"). They panic, the instance
// traps, and the host applies the operation's recovery policy.
func TestOKAndAppliedWithUnmarshalableResultTrap(t *testing.T) {
	for name, fn := range map[string]func(any, string) abi.Outcome{"OK": OK, "Applied": Applied} {
		func() {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, "guest: marshal result after the effect: json: unsupported type") {
					t.Errorf("%s(unmarshalable) panicked with %v, want the marshal error", name, r)
				}
			}()
			o := fn(unmarshalable{C: make(chan int)}, "rcpt")
			t.Errorf("%s(unmarshalable) = %+v, want a panic", name, o)
		}()
	}
}

func TestErrorOutcomesFormatTheirMessage(t *testing.T) {
	tests := []struct {
		name string
		o    abi.Outcome
		kind abi.OutcomeKind
	}{
		{"Retryable", Retryable("status %d from %s", 503, "stripe"), abi.OutcomeRetryable},
		{"Permanent", Permanent("status %d from %s", 503, "stripe"), abi.OutcomePermanent},
		{"NotApplied", NotApplied("status %d from %s", 503, "stripe"), abi.OutcomeNotApplied},
		{"Unknown", Unknown("status %d from %s", 503, "stripe"), abi.OutcomeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := abi.Outcome{Kind: tc.kind, Error: "status 503 from stripe"}
			if !reflect.DeepEqual(tc.o, want) {
				t.Fatalf("%s = %+v, want %+v", tc.name, tc.o, want)
			}
		})
	}
}

func TestCallConfigMapsHostStatusesToErrors(t *testing.T) {
	h := &fakeHost{
		config:   map[string]string{"api_base": "https://api.example.com", "empty": ""},
		statuses: map[string]int32{"undeclared": abi.StatusNotDeclared, "unset": abi.StatusNotSet},
	}
	c := &Call{Operation: "op", host: h}
	tests := []struct {
		key, want string
		wantErr   error
	}{
		{"api_base", "https://api.example.com", nil},
		{"empty", "", nil},
		{"undeclared", "", ErrConfigNotDeclared},
		{"unset", "", ErrConfigNotSet},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			got, err := c.Config(tc.key)
			if got != tc.want || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Config(%q) = %q, %v; want %q, %v", tc.key, got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), `"`+tc.key+`"`) {
				t.Fatalf("error %q does not name the key", err)
			}
		})
	}
}

func TestCallForwardsEverythingElseToTheHost(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &fakeHost{execID: "exec-1", now: now, sleepOK: true, resp: abi.HTTPResponse{Status: 204}}
	c := &Call{Operation: "op", Key: "k", host: h}

	if got := c.ExecutionID(); got != "exec-1" {
		t.Errorf("ExecutionID() = %q", got)
	}
	req := abi.HTTPRequest{Method: "GET", URL: "https://api.example.com/x"}
	if resp := c.HTTP(req); resp.Status != 204 || len(h.reqs) != 1 || h.reqs[0].URL != req.URL {
		t.Errorf("HTTP: resp %+v, host saw %+v", resp, h.reqs)
	}
	c.Debug("d")
	c.Info("i")
	c.Warn("w")
	c.Error("e")
	if want := []string{"debug d", "info i", "warn w", "error e"}; !reflect.DeepEqual(h.logs, want) {
		t.Errorf("logs = %q, want %q", h.logs, want)
	}
	if got := c.Now(); !got.Equal(now) {
		t.Errorf("Now() = %v, want %v", got, now)
	}
	if !c.Sleep(time.Second) {
		t.Error("Sleep reported a cut-short sleep")
	}
	h.sleepOK = false
	if c.Sleep(time.Minute) {
		t.Error("Sleep did not report the deadline cutting it short")
	}
	if want := []time.Duration{time.Second, time.Minute}; !reflect.DeepEqual(h.slept, want) {
		t.Errorf("slept %v, want %v", h.slept, want)
	}
}
