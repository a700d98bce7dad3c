package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
)

// The tasks extension (io.modelcontextprotocol/tasks) over /mcp, spoken
// as the extension's specification writes it, in raw JSON-RPC: the SDK
// has no client for it.

var rpcIDs atomic.Int64

// modernStream sends one 2026-07-28 request to /mcp as the principal of
// tok (see modernRPC) and returns the response, its stream unread.
func (f *fixture) modernStream(ctx context.Context, tok, method string, params map[string]any) *http.Response {
	t := f.t
	t.Helper()
	req := f.modernRequest(tok, method, params, false, rpcIDs.Add(1))
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"), resp.Header.Get("Content-Type"))
	return resp
}

// waitForEvent reads an event stream until a message of method (true) or
// its end (false).
func waitForEvent(resp *http.Response, method string) bool {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"method":"`+method+`"`) {
			return true
		}
	}
	return false
}

// modernRPC sends one 2026-07-28 request to /mcp as the principal of tok
// (no initialize, no session), declaring the tasks extension when tasks
// is set, and returns its answer.
func (f *fixture) modernRPC(tok, method string, params map[string]any, tasks bool) rpcResponse {
	t := f.t
	t.Helper()
	id := rpcIDs.Add(1)
	resp, err := http.DefaultClient.Do(f.modernRequest(tok, method, params, tasks, id))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Empty(t, resp.Header.Get("Mcp-Session-Id"), "stateless")
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	msgs := [][]byte{raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msgs = nil
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				msgs = append(msgs, []byte(data))
			}
		}
	}
	for _, m := range msgs {
		var r rpcResponse
		if json.Unmarshal(m, &r) == nil && string(r.ID) == fmt.Sprint(id) {
			return r
		}
	}
	t.Fatalf("%s: no answer to request %d in %s %s", method, id, resp.Status, raw)
	return rpcResponse{}
}

// modernRequest is a 2026-07-28 request of method with id, its _meta
// and headers as the specification has a client send them.
func (f *fixture) modernRequest(tok, method string, params map[string]any, tasks bool, id int64) *http.Request {
	t := f.t
	t.Helper()
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if tasks {
		caps["extensions"] = map[string]any{mcpserver.ExtensionTasks: map[string]any{}}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = modern
	meta["io.modelcontextprotocol/clientCapabilities"] = caps
	params["_meta"] = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", modern)
	req.Header.Set("Mcp-Method", method)
	switch {
	case method == "tools/call":
		req.Header.Set("Mcp-Name", params["name"].(string))
	case strings.HasPrefix(method, "tasks/"):
		req.Header.Set("Mcp-Name", params["taskId"].(string))
	}
	return req
}

// task is a task as the extension shapes it.
type task struct {
	ResultType    string          `json:"resultType"`
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	CreatedAt     string          `json:"createdAt"`
	LastUpdatedAt string          `json:"lastUpdatedAt"`
	TTLMs         *int64          `json:"ttlMs"`
	Poll          int64           `json:"pollIntervalMs"`
	Result        json.RawMessage `json:"result"`
}

func decodeTask(t testing.TB, r rpcResponse) task {
	t.Helper()
	require.Nil(t, r.Error, "error %+v", r.Error)
	var tk task
	require.NoError(t, json.Unmarshal(r.Result, &tk), "%s", r.Result)
	require.Contains(t, string(r.Result), `"ttlMs":null`)
	return tk
}

// taskOutcome is the structuredContent of a completed task's result.
func taskOutcome(t testing.TB, tk task) (mcpserver.Result, bool) {
	t.Helper()
	require.Equal(t, "completed", tk.Status, "%+v", tk)
	var res struct {
		IsError           bool             `json:"isError"`
		StructuredContent mcpserver.Result `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(tk.Result, &res), "%s", tk.Result)
	return res.StructuredContent, res.IsError
}

func payCall(session, call string) map[string]any {
	return map[string]any{"name": "payments_create_payment", "arguments": payment,
		"_meta": map[string]any{mcpserver.MetaSessionID: session, mcpserver.MetaToolCallID: call}}
}

// TestTasksGatedPayment: a 2026-07-28 client that declares the tasks
// extension is answered with a task for a payment that waits for a human
// (the execution is the task: its id is the execution id, in the ledger
// before the answer). tasks/get reads the ledger: working while the
// approval is pending, across a restart of the server; once a reviewer
// approved out of band, the next tasks/get runs the call and the task is
// completed with the tools/call result: one charge, however often the
// client polls.
func TestTasksGatedPayment(t *testing.T) {
	f := newFixture(t, overHTTP)
	before := charges()
	created := decodeTask(t, f.modernRPC(tokenRuntime, "tools/call", payCall("s-task", "c1"), true))
	require.Equal(t, "task", created.ResultType)
	require.Equal(t, "working", created.Status)
	require.Contains(t, created.StatusMessage, "A human must approve")
	require.Equal(t, int64(5000), created.Poll)
	rec, _, err := f.ex.Get(context.Background(), created.TaskID)
	require.NoError(t, err, "the task is the execution, recorded before the answer")
	require.Equal(t, "awaiting_approval", string(rec.State))

	f.restart()
	got := decodeTask(t, f.modernRPC(tokenRuntime, "tasks/get", map[string]any{"taskId": created.TaskID}, true))
	require.Equal(t, "complete", got.ResultType)
	require.Equal(t, "working", got.Status)
	require.Equal(t, created.CreatedAt, got.CreatedAt)

	_, err = f.ex.Approve(context.Background(), rec.Approval.ID, host.Decision{By: "olga", ArgsDigest: rec.ArgsDigest})
	require.NoError(t, err)
	require.Equal(t, before, charges(), "approval alone charges nothing")
	for range 3 {
		done := decodeTask(t, f.modernRPC(tokenRuntime, "tasks/get", map[string]any{"taskId": created.TaskID}, true))
		out, isError := taskOutcome(t, done)
		require.False(t, isError)
		require.Equal(t, "succeeded", out.Status)
		require.Equal(t, created.TaskID, out.ExecutionID)
		require.Equal(t, "s-task", out.SessionID)
		require.Equal(t, before+1, charges())
	}
	// The call re-sent under its ids finds the same execution.
	again := f.modernRPC(tokenRuntime, "tools/call", payCall("s-task", "c1"), true)
	require.Contains(t, string(again.Result), `"recorded":true`)
	require.Equal(t, before+1, charges())
}

// TestTasksRejectedAndCancelled: a rejected call's task completes with
// the isError result the model must see; tasks/cancel cancels a waiting
// call's execution. Nothing is charged.
func TestTasksRejectedAndCancelled(t *testing.T) {
	f := newFixture(t, overHTTP)
	before := charges()
	rej := decodeTask(t, f.modernRPC(tokenRuntime, "tools/call", payCall("s-task2", "c1"), true))
	rec, _, err := f.ex.Get(context.Background(), rej.TaskID)
	require.NoError(t, err)
	_, err = f.ex.Reject(context.Background(), rec.Approval.ID, host.Decision{By: "olga", Reason: "not this one"})
	require.NoError(t, err)
	out, isError := taskOutcome(t, decodeTask(t, f.modernRPC(tokenRuntime, "tasks/get", map[string]any{"taskId": rej.TaskID}, true)))
	require.True(t, isError)
	require.Equal(t, "rejected", out.Status)

	cancel := decodeTask(t, f.modernRPC(tokenRuntime, "tools/call", payCall("s-task2", "c2"), true))
	ack := f.modernRPC(tokenRuntime, "tasks/cancel", map[string]any{"taskId": cancel.TaskID}, true)
	require.Nil(t, ack.Error)
	require.JSONEq(t, `"complete"`, string(mustField(t, ack.Result, "resultType")))
	got := decodeTask(t, f.modernRPC(tokenRuntime, "tasks/get", map[string]any{"taskId": cancel.TaskID}, true))
	require.Equal(t, "cancelled", got.Status)
	require.Equal(t, before, charges())
}

// TestTasksRefusals: tasks are offered to clients that declare the
// extension only, and a task is its principal's namespace's only.
func TestTasksRefusals(t *testing.T) {
	f := newFixture(t, overHTTP, fixtureOpts{principals: []httpapi.Principal{
		{Name: "other", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: "tok-other", Namespaces: []string{"tenant-b"}},
	}})
	// Without the extension: the awaiting_approval result, as before.
	plain := f.modernRPC(tokenRuntime, "tools/call", payCall("s-task3", "c1"), false)
	require.Nil(t, plain.Error)
	require.NotContains(t, string(plain.Result), `"resultType":"task"`)
	require.Contains(t, string(plain.Result), `"status":"awaiting_approval"`)
	execID := string(mustField(t, mustField(t, plain.Result, "structuredContent"), "execution_id"))
	execID = strings.Trim(execID, `"`)

	for _, tt := range []struct {
		name, tok, task string
		tasks           bool
		code            int
	}{
		{"no extension declared", tokenRuntime, execID, false, -32021},
		{"unknown task", tokenRuntime, "ex_nosuchtask", true, -32602},
		{"another namespace's principal", "tok-other", execID, true, -32602},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := f.modernRPC(tt.tok, "tasks/get", map[string]any{"taskId": tt.task}, tt.tasks)
			require.NotNil(t, r.Error, "answered %s", r.Result)
			require.Equal(t, tt.code, r.Error.Code, r.Error.Message)
		})
	}
	// The same task for its own principal.
	got := decodeTask(t, f.modernRPC(tokenRuntime, "tasks/get", map[string]any{"taskId": execID}, true))
	require.Equal(t, "working", got.Status)
}

func mustField(t testing.TB, obj json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(obj, &m), "%s", obj)
	v, ok := m[key]
	require.True(t, ok, "no %q in %s", key, obj)
	return v
}
