package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
)

// wireCases are tools/call requests that mean more than one thing: the
// SDK's decoder would turn each of the first three into the session
// "s\uFFFD" (so they were one execution), and would pick one of two equal
// keys. Each is refused with a JSON-RPC invalid-params error, and nothing
// is recorded.
var wireCases = []struct {
	name, params string
}{
	{"invalid UTF-8 0xff", `{"name":"plain_echo","arguments":{"msg":"w"},"_meta":{"io.connhost/session_id":"s` + "\xff" + `","io.connhost/tool_call_id":"c"}}`},
	{"invalid UTF-8 0xfe", `{"name":"plain_echo","arguments":{"msg":"w"},"_meta":{"io.connhost/session_id":"s` + "\xfe" + `","io.connhost/tool_call_id":"c"}}`},
	{"unpaired surrogate", `{"name":"plain_echo","arguments":{"msg":"w"},"_meta":{"io.connhost/session_id":"s\udc80","io.connhost/tool_call_id":"c"}}`},
	{"_meta key twice", `{"name":"plain_echo","arguments":{"msg":"w"},"_meta":{"io.connhost/session_id":"a","io.connhost/session_id":"b","io.connhost/tool_call_id":"c"}}`},
	{"params key twice", `{"name":"noop_echo","name":"plain_echo","arguments":{"msg":"w"},"_meta":{"io.connhost/session_id":"s","io.connhost/tool_call_id":"c"}}`},
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestWireStrictStdio: over stdio, each ambiguous tools/call is answered
// with -32602 before the SDK decodes it; a clean one runs.
func TestWireStrictStdio(t *testing.T) {
	f := newFixture(t, overStdio)
	cmd := exec.Command(binary(t), f.stdioArgs(false)...)
	cmd.Stderr = f.log
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	lines := bufio.NewReader(stdout)
	send := func(s string) {
		_, err := io.WriteString(stdin, s+"\n")
		require.NoError(t, err)
	}
	recv := func() rpcResponse {
		type line struct {
			b   []byte
			err error
		}
		ch := make(chan line, 1)
		go func() { b, err := lines.ReadBytes('\n'); ch <- line{b, err} }()
		select {
		case l := <-ch:
			require.NoError(t, l.err)
			var r rpcResponse
			require.NoError(t, json.Unmarshal(l.b, &r), "%s", l.b)
			return r
		case <-time.After(2 * time.Minute):
			t.Fatal("no answer from connhost mcp")
		}
		return rpcResponse{}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	require.Nil(t, recv().Error)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, c := range wireCases {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, 10+i, c.params))
		r := recv()
		require.Equal(t, fmt.Sprint(10+i), string(r.ID), c.name)
		require.NotNil(t, r.Error, "%s: answered %s", c.name, r.Result)
		require.Equal(t, -32602, r.Error.Code, c.name)
		require.Contains(t, r.Error.Message, "nothing was done", c.name)
	}
	send(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"plain_echo","arguments":{"msg":"w"},"_meta":{"io.connhost/session_id":"s","io.connhost/tool_call_id":"c"}}}`)
	r := recv()
	require.Nil(t, r.Error)
	require.Contains(t, string(r.Result), `"status":"succeeded"`)
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	// Only the clean call is in the ledger.
	led, err := ledger.Open(context.Background(), ledger.Options{Dir: f.data + "/ledger", Create: ledger.CreateNever})
	require.NoError(t, err)
	defer led.Close()
	recs, err := led.List(context.Background(), ledger.Filter{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "s", recs[0].SessionID)
}

// TestWireStrictHTTP: over /mcp, the same requests get the same JSON-RPC
// error as an application/json answer, and nothing is recorded.
func TestWireStrictHTTP(t *testing.T) {
	f := newFixture(t, overHTTP)
	post := func(session, body string) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tokenRuntime)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	resp, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	session := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, session)
	resp, _ = post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Less(t, resp.StatusCode, 300)
	for i, c := range wireCases {
		resp, b := post(session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, 10+i, c.params))
		require.Equal(t, http.StatusOK, resp.StatusCode, c.name)
		var r rpcResponse
		require.NoError(t, json.Unmarshal(b, &r), "%s: %s", c.name, b)
		require.NotNil(t, r.Error, "%s: answered %s", c.name, b)
		require.Equal(t, -32602, r.Error.Code, c.name)
		require.Equal(t, fmt.Sprint(10+i), string(r.ID), c.name)
	}
	recs, err := f.ex.Ledger().List(context.Background(), ledger.Filter{})
	require.NoError(t, err)
	require.Empty(t, recs, "no ambiguous call was recorded")
}
