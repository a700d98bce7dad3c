package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/connhost/connhost/internal/strictjson"
)

// The SDK decodes a request with a decoder that keeps the last of two
// equal keys and replaces invalid UTF-8 and unpaired surrogate escapes by
// U+FFFD, so "s\xff", "s\xfe" and "s\udc80" in _meta would reach the
// handler as one session id. The identity must mean one thing only, so a
// tools/call request is checked on the wire first, with the parser the
// HTTP API uses for its bodies (internal/strictjson), and one that does
// not parse strictly is answered with a JSON-RPC error (invalid params)
// without reaching the SDK: nothing is recorded for it.

// codeInvalidParams is JSON-RPC's "invalid params" error code.
const codeInvalidParams = -32602

// wireProblem says why a JSON-RPC message from a client is refused before
// the SDK decodes it, or returns ok. id is the request's id as sent
// (nil for a notification, which gets no answer). Only tools/call
// requests are judged: other methods carry no identity, and the SDK's own
// decoding stays theirs.
func wireProblem(msg []byte) (id json.RawMessage, problem string, ok bool) {
	_, err := strictjson.ParseObject(msg)
	if err == nil {
		return nil, "", true
	}
	// Not strict: is it a tools/call? A lenient look finds out, as the
	// SDK's decoder would.
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	lenientErr := json.Unmarshal(msg, &env)
	var dup *strictjson.DuplicateKeyError
	twice := errors.As(err, &dup) && dup.Pointer() == "" && (dup.Key == "method" || dup.Key == "params")
	if !twice && (lenientErr != nil || env.Method != "tools/call") {
		return nil, "", true
	}
	// A tools/call, or a request naming its method or params twice (which
	// one the SDK takes is its decoder's choice, not the client's).
	return validID(env.ID), "tools/call request: " + err.Error(), false
}

// validID returns id when it is a JSON-RPC request id (a string or a
// number), else nil.
func validID(id json.RawMessage) json.RawMessage {
	id = bytes.TrimSpace(id)
	if len(id) == 0 || !utf8.Valid(id) {
		return nil
	}
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return id
	}
	return nil
}

// errorResponse is the JSON-RPC error answer to a refused request.
func errorResponse(id json.RawMessage, problem string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{codeInvalidParams, "invalid params: " + problem + "; nothing was done"}})
	return b
}

// strictStdio filters the lines a stdio client sends: a tools/call that
// does not parse strictly is answered on out and never reaches the SDK.
// out is shared with the SDK's transport through lockedWriter, whose
// writes are whole messages.
type strictStdio struct {
	src *bufio.Reader
	out *lockedWriter
	buf []byte // what is left of the line being handed on
	err error
}

func newStrictStdio(r io.Reader, out *lockedWriter) *strictStdio {
	return &strictStdio{src: bufio.NewReaderSize(r, 64<<10), out: out}
}

func (s *strictStdio) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		line, err := s.src.ReadBytes('\n')
		s.err = err
		if len(line) == 0 {
			continue
		}
		msg := bytes.TrimSpace(line)
		if len(msg) > 0 && msg[0] == '{' {
			if id, problem, ok := wireProblem(msg); !ok {
				if id != nil {
					_, _ = s.out.Write(append(errorResponse(id, problem), '\n'))
				}
				continue
			}
		}
		s.buf = line
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// Close lets the transport close the reader it was given.
func (s *strictStdio) Close() error { return nil }

// lockedWriter makes each Write whole with respect to the others: the
// SDK writes one message per call, and so does strictStdio.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close leaves the underlying writer open (the process's stdout).
func (l *lockedWriter) Close() error { return nil }

// strictHTTP answers a POST whose tools/call does not parse strictly with
// the JSON-RPC error, before the SDK's handler reads it. A body over
// limit goes on unread past the limit, for the SDK to refuse.
func strictHTTP(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if int64(len(body)) <= limit {
			if msg := bytes.TrimSpace(body); len(msg) > 0 {
				var refused []byte
				switch msg[0] {
				case '{':
					if id, problem, ok := wireProblem(msg); !ok {
						refused = errorResponse(id, problem)
					}
				case '[':
					refused = batchProblem(msg)
				}
				if refused != nil {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusOK)
					_, _ = w.Write(refused)
					return
				}
			}
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		next.ServeHTTP(w, r)
	})
}

// batchProblem refuses a JSON-RPC batch that holds a tools/call that does
// not parse strictly (the whole batch: its other members are answered by
// nobody, as for any malformed batch), or returns nil.
func batchProblem(msg []byte) []byte {
	var items []json.RawMessage
	if json.Unmarshal(msg, &items) != nil {
		return nil
	}
	for _, it := range items {
		if _, problem, ok := wireProblem(bytes.TrimSpace(it)); !ok {
			return errorResponse(nil, fmt.Sprintf("in a batch: %s", problem))
		}
	}
	return nil
}
