package crashtest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/connhost/connhost/manifests"
)

// A probe config tells the matrix how to observe a provider that answers
// no probe contract of its own: the matrix puts a proxy in front of the
// provider, hands the connector the proxy's URL, and asks the provider's
// own API. It is a TOML file, by convention next to the manifest
// (manifests/<connector>.probe.toml), with a table per operation:
//
//	[probe]
//	headers = { Authorization = "Bearer {env.PROVIDER_TOKEN}" }   # optional
//
//	[operation.create_item]
//	hold    = "POST /api/items"                  # the request the in-flight row holds
//	args    = '{"name": "crashtest {unique}"}'   # sample arguments
//	receipt = "GET /api/items/{receipt}"         # 2xx: exists, 404 or 410: does not
//
//	[operation.create_item.effects]
//	count = "GET /api/items?perPage=1"           # a query answering JSON…
//	json  = "totalItems"                         # …and the path of the count in it
//
// Everything is optional but what an operation needs to run: sample
// arguments (args, possibly filled by setup) for every operation, and a
// way to count effects (effects) for every external one. The parts:
//
//   - hold: METHOD /path, the request of the operation that takes effect.
//     A path segment {name} matches any one segment, {name...} the rest
//     of the path; the query is not matched. Without it the in-flight row
//     is n/a.
//   - effects: how many effects the provider holds. Either count (a GET
//     whose JSON answer holds the count at json: a number, or an array
//     whose length is the count; the path is names and array indexes
//     separated by dots, and without json, or with json = "", the answer
//     itself is the count: a bare top-level array) or answers (METHOD /path: the 2xx answers the
//     provider gave such requests of the connector, counted by the proxy,
//     without those carrying unless_header "Name: value", such as a
//     replay's Idempotent-Replayed: true). For a delete, removes = true:
//     each object that goes away is one effect (a count that drops by one
//     per delete; answers count deletes anyway).
//   - receipt: a GET URL with {receipt}, the receipt of a succeeded call:
//     2xx says the object exists, 404 or 410 that it does not. A
//     succeeded call must name an object that exists, or for removes one
//     that is gone; a succeeded call without a receipt fails the cell.
//     receipt = "none" says the operation's calls name nothing. Without
//     receipt, receipts are not checked.
//   - args: the operation's sample arguments, JSON once the placeholders
//     are filled in.
//   - setup: a request made before each cell (request = "METHOD /path",
//     body, content_type — the default is application/json —, headers)
//     whose JSON answer fills {setup.PATH} in args: the object a read, a
//     refund or a delete names.
//   - [probe] headers go with every request the probe makes itself
//     (counts, receipts, setups), never with the connector's.
//
// Placeholders: {unique} is a token new in each cell (the same in its
// setup and args), {env.NAME} the environment variable NAME (read when
// the config is loaded; unset is an error), {setup.PATH} a value of the
// setup's answer, {receipt} the receipt. A value is escaped for where it
// goes: inside a JSON string in args and JSON bodies, query-escaped in
// other bodies, path-escaped in URLs. Paths are relative to the provider
// URL.
type ProbeConfig struct {
	// Path is the file the config was read from.
	Path string
	// Headers go with every request the probe sends itself.
	Headers map[string]string
	// Operations are the operations the config describes, by name.
	Operations map[string]*ProbeOperation
}

// ProbeOperation is how the probe observes one operation.
type ProbeOperation struct {
	Name string
	// Line is the line of the operation's table.
	Line int
	// Hold is the request the in-flight row holds, or nil.
	Hold *RequestPattern
	// Effects says how effects are counted; its zero value counts none (a
	// read).
	Effects EffectRule
	// Receipt is the URL template that looks a receipt up ("" when
	// receipts are not checked); NoReceipt marks receipt = "none".
	Receipt   string
	NoReceipt bool
	// Args is the sample arguments' template ("" when the config gives
	// none).
	Args string
	// Setup is the request made before each cell, or nil.
	Setup *SetupRequest
}

// EffectRule counts an operation's effects: by a query (Count and JSON)
// or by the proxy's counted answers (Answers).
type EffectRule struct {
	// Count is the URL of the GET that answers the count, JSON its path
	// in the answer ("": the answer itself, a number or an array).
	Count, JSON string
	// Answers are the requests whose 2xx answers are counted, except
	// those carrying the header UnlessHeader (a name) with the value
	// UnlessValue.
	Answers                   *RequestPattern
	UnlessHeader, UnlessValue string
	// Removes counts objects that go away (a delete).
	Removes bool
}

// SetupRequest is a request the probe makes before a cell.
type SetupRequest struct {
	Method, URL string
	Body        string
	ContentType string
	Headers     map[string]string
}

// RequestPattern matches requests by method and path (see ProbeConfig).
type RequestPattern struct {
	Method string
	// Segments are the path's segments; "{x}" matches one, "{x...}" (last
	// only) any rest.
	Segments []string
	text     string
}

// String returns the pattern as written.
func (p *RequestPattern) String() string { return p.text }

// Match reports whether a request of method to path matches.
func (p *RequestPattern) Match(method, path string) bool {
	if p == nil || !strings.EqualFold(p.Method, method) {
		return false
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, want := range p.Segments {
		if strings.HasSuffix(want, "...}") {
			return true
		}
		if i >= len(segs) {
			return false
		}
		if isWildcard(want) {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if segs[i] != want {
			return false
		}
	}
	return len(segs) == len(p.Segments)
}

func isWildcard(seg string) bool {
	return len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}'
}

// ProbeConfigError reports every problem of a probe config with its file
// and line.
type ProbeConfigError struct {
	File     string
	Problems []manifests.Problem
}

// Error prints one problem per line as "file:line: field: msg" ("file:
// field: msg" for what the file lacks).
func (e *ProbeConfigError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if p.Line == 0 && p.Column == 0 {
			b.WriteString(e.File + ": " + p.Field + ": " + p.Msg)
			continue
		}
		b.WriteString(e.File + ":" + p.String())
	}
	return b.String()
}

// Unwrap returns ErrProbeConfig.
func (e *ProbeConfigError) Unwrap() error { return ErrProbeConfig }

// ErrProbeConfig is wrapped by every *ProbeConfigError.
var ErrProbeConfig = errors.New("crashtest: invalid probe config")

// LoadProbeConfig reads and parses the probe config at path; env looks up
// the environment variables it names (os.LookupEnv when nil).
func LoadProbeConfig(path string, env func(string) (string, bool)) (*ProbeConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("crashtest: probe config: %w", err)
	}
	return ParseProbeConfig(path, data, env)
}

// ParseProbeConfig parses a probe config (see ProbeConfig); name is used
// in errors and as ProbeConfig.Path. Every problem is reported at once in
// a *ProbeConfigError.
func ParseProbeConfig(name string, data []byte, env func(string) (string, bool)) (*ProbeConfig, error) {
	if env == nil {
		env = os.LookupEnv
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		pr := manifests.Problem{Msg: "toml: " + err.Error()}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			pr = manifests.Problem{Line: pe.Position.Line, Column: pe.Position.Col, Msg: "toml: " + pe.Message}
		}
		return nil, &ProbeConfigError{File: name, Problems: []manifests.Problem{pr}}
	}
	p := &probeParser{lines: manifests.KeyLines(data), env: env}
	cfg := &ProbeConfig{Path: name, Operations: map[string]*ProbeOperation{}}
	for k, v := range raw {
		switch k {
		case "probe":
			t, ok := p.table(v, "probe")
			if !ok {
				continue
			}
			for k, v := range t {
				switch k {
				case "headers":
					cfg.Headers = p.headers(v, "probe.headers")
				default:
					p.unknown("probe", k, "headers")
				}
			}
		case "operation":
			ops, ok := p.table(v, "operation")
			if !ok {
				continue
			}
			for name, v := range ops {
				if op := p.operation(name, v); op != nil {
					cfg.Operations[name] = op
				}
			}
		default:
			p.unknown("", k, "probe, operation")
		}
	}
	if len(p.problems) > 0 {
		slices.SortStableFunc(p.problems, func(a, b manifests.Problem) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), strings.Compare(a.Field, b.Field), strings.Compare(a.Msg, b.Msg))
		})
		return nil, &ProbeConfigError{File: name, Problems: p.problems}
	}
	return cfg, nil
}

type probeParser struct {
	lines    map[string]int
	env      func(string) (string, bool)
	problems []manifests.Problem
}

// line finds the line of path, else of its enclosing tables.
func (p *probeParser) line(path string) int {
	for {
		if n, ok := p.lines[path]; ok {
			return n
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
}

func (p *probeParser) add(path, format string, args ...any) {
	p.problems = append(p.problems, manifests.Problem{Line: p.line(path), Field: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *probeParser) unknown(table, key, known string) {
	path := key
	if table != "" {
		path = table + "." + key
	}
	p.add(path, "unknown key %q (known: %s)", key, known)
}

func (p *probeParser) table(v any, path string) (map[string]any, bool) {
	t, ok := v.(map[string]any)
	if !ok {
		p.add(path, "want a table, got %s", tomlKind(v))
	}
	return t, ok
}

func (p *probeParser) str(v any, path string) (string, bool) {
	s, ok := v.(string)
	if !ok {
		p.add(path, "want a string, got %s", tomlKind(v))
	}
	return s, ok
}

func tomlKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}

var operationNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

func (p *probeParser) operation(name string, v any) *ProbeOperation {
	path := "operation." + name
	t, ok := p.table(v, path)
	if !ok {
		return nil
	}
	if !operationNameRE.MatchString(name) {
		p.add(path, "%q is not an operation name", name)
		return nil
	}
	op := &ProbeOperation{Name: name, Line: p.line(path)}
	for k, v := range t {
		kp := path + "." + k
		switch k {
		case "hold":
			if s, ok := p.str(v, kp); ok {
				op.Hold = p.pattern(s, kp)
			}
		case "effects":
			op.Effects = p.effects(v, kp)
		case "receipt":
			s, ok := p.str(v, kp)
			switch {
			case !ok:
			case s == "none":
				op.NoReceipt = true
			default:
				method, u := p.request(s, kp, "receipt")
				switch {
				case u == "":
				case method != http.MethodGet:
					p.add(kp, "a receipt is looked up with GET, not %s", method)
				case !strings.Contains(u, "{receipt}"):
					p.add(kp, "%q does not name the receipt: put {receipt} where it goes (or receipt = \"none\")", s)
				default:
					op.Receipt = p.expand(u, kp)
				}
			}
		case "args":
			if s, ok := p.str(v, kp); ok {
				op.Args = p.expand(s, kp)
				if !json.Valid([]byte(placeholderRE.ReplaceAllString(op.Args, "0"))) {
					p.add(kp, "not JSON (with its placeholders filled in): %s", clip(op.Args))
				}
			}
		case "setup":
			op.Setup = p.setup(v, kp)
		default:
			p.unknown(path, k, "hold, effects, receipt, args, setup")
		}
	}
	if op.Setup != nil && !strings.Contains(op.Args, "{setup.") {
		p.add(path+".setup", "args use nothing of the setup's answer: name what they need with {setup.PATH}")
	}
	if op.Setup == nil && strings.Contains(op.Args, "{setup.") {
		p.add(path+".args", "args name {setup.…} but the operation has no setup")
	}
	if op.Effects.Removes && op.Effects.Count == "" && op.Effects.Answers == nil {
		p.add(path+".effects", "removes counts nothing without count or answers")
	}
	return op
}

func (p *probeParser) effects(v any, path string) EffectRule {
	var r EffectRule
	t, ok := p.table(v, path)
	if !ok {
		return r
	}
	jsonSet := false
	for k, v := range t {
		kp := path + "." + k
		switch k {
		case "count":
			if s, ok := p.str(v, kp); ok {
				method, u := p.request(s, kp, "count")
				if u != "" && method != http.MethodGet {
					p.add(kp, "effects are counted with GET, not %s", method)
				}
				r.Count = p.expand(u, kp)
			}
		case "json":
			if s, ok := p.str(v, kp); ok {
				if _, err := splitJSONPath(s); err != nil && s != "" {
					p.add(kp, "%v", err)
				}
				r.JSON, jsonSet = s, true
			}
		case "answers":
			if s, ok := p.str(v, kp); ok {
				r.Answers = p.pattern(s, kp)
			}
		case "unless_header":
			if s, ok := p.str(v, kp); ok {
				name, value, found := strings.Cut(s, ":")
				name, value = strings.TrimSpace(name), strings.TrimSpace(value)
				if !found || name == "" || value == "" {
					p.add(kp, "want \"Name: value\", got %q", s)
				}
				r.UnlessHeader, r.UnlessValue = http.CanonicalHeaderKey(name), value
			}
		case "removes":
			b, ok := v.(bool)
			if !ok {
				p.add(kp, "want a boolean, got %s", tomlKind(v))
			}
			r.Removes = b
		default:
			p.unknown(path, k, "count, json, answers, unless_header, removes")
		}
	}
	switch {
	case r.Count != "" && r.Answers != nil:
		p.add(path, "count and answers exclude each other: count effects one way")
	case r.Count == "" && jsonSet:
		p.add(path, "json needs count: the request that answers it")
	case r.Answers == nil && r.UnlessHeader != "":
		p.add(path, "unless_header needs answers")
	case r.Count == "" && r.Answers == nil && len(t) > 0:
		p.add(path, "say how effects are counted: count and json, or answers")
	}
	return r
}

func (p *probeParser) setup(v any, path string) *SetupRequest {
	t, ok := p.table(v, path)
	if !ok {
		return nil
	}
	s := &SetupRequest{ContentType: "application/json"}
	for k, v := range t {
		kp := path + "." + k
		switch k {
		case "request":
			if str, ok := p.str(v, kp); ok {
				s.Method, s.URL = p.request(str, kp, "request")
				s.URL = p.expand(s.URL, kp)
			}
		case "body":
			if str, ok := p.str(v, kp); ok {
				s.Body = p.expand(str, kp)
			}
		case "content_type":
			if str, ok := p.str(v, kp); ok {
				s.ContentType = str
			}
		case "headers":
			s.Headers = p.headers(v, kp)
		default:
			p.unknown(path, k, "request, body, content_type, headers")
		}
	}
	if s.URL == "" {
		if _, ok := t["request"]; !ok {
			p.add(path, "setup needs request = \"METHOD /path\"")
		}
		return nil
	}
	if isJSON(s.ContentType) && s.Body != "" && !json.Valid([]byte(placeholderRE.ReplaceAllString(s.Body, "0"))) {
		p.add(path+".body", "not JSON: %s", clip(s.Body))
	}
	return s
}

func (p *probeParser) headers(v any, path string) map[string]string {
	t, ok := p.table(v, path)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for k, v := range t {
		if s, ok := p.str(v, path+"."+k); ok {
			if !validHeaderName(k) {
				p.add(path+"."+k, "%q is not a header name", k)
				continue
			}
			out[http.CanonicalHeaderKey(k)] = p.expand(s, path+"."+k)
		}
	}
	return out
}

// isJSON reports whether a content type is JSON's.
func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}

var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// request reads "METHOD /path?query" and returns the method and the
// path with its query, or "" after reporting a problem.
func (p *probeParser) request(s, path, what string) (string, string) {
	method, u, ok := strings.Cut(strings.TrimSpace(s), " ")
	u = strings.TrimSpace(u)
	switch {
	case !ok || !slices.Contains(methods, method):
		p.add(path, "%s %q: want \"METHOD /path\" with METHOD one of %s", what, s, strings.Join(methods, ", "))
		return "", ""
	case !strings.HasPrefix(u, "/") || strings.ContainsAny(u, " \t\r\n#"):
		p.add(path, "%s %q: the path must start with / and hold no spaces or fragment (it is relative to the provider URL)", what, s)
		return "", ""
	}
	return method, u
}

func (p *probeParser) pattern(s, path string) *RequestPattern {
	method, u := p.request(s, path, "pattern")
	if u == "" {
		return nil
	}
	if strings.Contains(u, "?") {
		p.add(path, "pattern %q: the query is not matched; leave it out", s)
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(u, "/"), "/")
	for i, seg := range segs {
		if strings.ContainsAny(seg, "{}") && !isWildcard(seg) {
			p.add(path, "pattern %q: a wildcard is a whole segment, {name} or {name...}", s)
			return nil
		}
		if strings.HasSuffix(seg, "...}") && i != len(segs)-1 {
			p.add(path, "pattern %q: {name...} must be the last segment", s)
			return nil
		}
	}
	return &RequestPattern{Method: method, Segments: segs, text: method + " " + u}
}

var placeholderRE = regexp.MustCompile(`\{([a-z]+)(?:\.([^{}]*))?\}`)

// expand replaces {env.NAME} now and checks the other placeholders.
func (p *probeParser) expand(s, path string) string {
	return placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := placeholderRE.FindStringSubmatch(m)
		switch kind, arg := sub[1], sub[2]; {
		case kind == "env" && arg != "":
			v, ok := p.env(arg)
			if !ok {
				p.add(path, "environment variable %s ({env.%s}) is not set", arg, arg)
			}
			return v
		case kind == "unique" && arg == "":
		case kind == "receipt" && arg == "" && strings.HasSuffix(path, ".receipt"):
		case kind == "setup" && arg != "" && strings.HasSuffix(path, ".args"):
			if _, err := splitJSONPath(arg); err != nil {
				p.add(path, "{setup.%s}: %v", arg, err)
			}
		case kind == "receipt" || kind == "setup":
			p.add(path, "%s has no value here: {receipt} goes in receipt, {setup.PATH} in args", m)
		default:
			p.add(path, "unknown placeholder %s (known: {unique}, {env.NAME}, {setup.PATH}, {receipt})", m)
		}
		return m
	})
}

// splitJSONPath splits a dotted JSON path into its steps.
func splitJSONPath(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("empty JSON path")
	}
	parts := strings.Split(s, ".")
	for _, part := range parts {
		if part == "" {
			return nil, fmt.Errorf("JSON path %q has an empty step", s)
		}
	}
	return parts, nil
}

// lookupJSON follows path (dotted names and array indexes) in a decoded
// JSON value; the empty path is the value itself.
func lookupJSON(v any, path string) (any, error) {
	if path == "" {
		return v, nil
	}
	steps, err := splitJSONPath(path)
	if err != nil {
		return nil, err
	}
	for i, step := range steps {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[step]; !ok {
				return nil, fmt.Errorf("no %q at %s", step, stepsSoFar(steps, i))
			}
		case []any:
			n, err := strconv.Atoi(step)
			if err != nil || n < 0 || n >= len(x) {
				return nil, fmt.Errorf("%s holds an array of %d, no element %q", stepsSoFar(steps, i), len(x), step)
			}
			v = x[n]
		default:
			return nil, fmt.Errorf("%s is %s, not an object or array", stepsSoFar(steps, i), jsonKind(v))
		}
	}
	return v, nil
}

func stepsSoFar(steps []string, i int) string {
	if i == 0 {
		return "the answer"
	}
	return strings.Join(steps[:i], ".")
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// ForManifest reports every problem of using cfg for m's operations: an
// operation the manifest does not declare, and for each operation to run
// (ops; nil: all) one without sample arguments (unless hasArgs says they
// come from elsewhere) or, external, without a way to count its effects.
func (cfg *ProbeConfig) ForManifest(m *manifests.Manifest, ops []string, hasArgs func(op string) bool) error {
	var errs []manifests.Problem
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cfg.Operations {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		if _, ok := m.Operation(n); !ok {
			errs = append(errs, manifests.Problem{Line: cfg.Operations[n].Line, Field: "operation." + n,
				Msg: fmt.Sprintf("connector %s has no operation %q (%s)", m.Connector.Name, n, m.Path)})
		}
	}
	for _, op := range m.Operations {
		if ops != nil && !slices.Contains(ops, op.Name) {
			continue
		}
		po := cfg.Operations[op.Name]
		line, field := 0, "operation."+op.Name
		if po != nil {
			line = po.Line
		}
		if (po == nil || po.Args == "") && (hasArgs == nil || !hasArgs(op.Name)) {
			errs = append(errs, manifests.Problem{Line: line, Field: field, Msg: "no sample arguments: give args (or --args)"})
		}
		if op.Effect == manifests.EffectExternal && (po == nil || (po.Effects.Count == "" && po.Effects.Answers == nil)) {
			errs = append(errs, manifests.Problem{Line: line, Field: field + ".effects",
				Msg: fmt.Sprintf("%s is external (%s): say how its effects are counted", op.Name, op.Recovery)})
		}
	}
	if len(errs) > 0 {
		return &ProbeConfigError{File: cfg.Path, Problems: errs}
	}
	return nil
}
