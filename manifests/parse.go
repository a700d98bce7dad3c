package manifests

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/connhost/connhost/abi"
)

// Defaults and bounds of manifest values.
const (
	DefaultMemoryMiB    = 64
	DefaultTimeout      = 15 * time.Second
	DefaultMaxOutputKiB = 256
	DefaultInstances    = 4
	DefaultLogKiB       = 64
	DefaultLogRecords   = 256
	DefaultApprovalTTL  = time.Hour
	DefaultMaxAttempts  = 3

	minMemoryMiB, maxMemoryMiB = 1, 4096
	minTimeout, maxTimeout     = time.Millisecond, 10 * time.Minute
	// An outcome is recorded in the ledger (its result base64-encoded)
	// next to arguments of up to 1 MiB (the HTTP API's body cap); 1 MiB of
	// output keeps every record well inside the ledger's 4 MiB record cap,
	// so an outcome that happened can always be written down.
	minMaxOutputKiB, maxMaxOutputKiB = 1, 1024
	minInstances, maxInstances       = 1, 256
	// One call may log at most 1 MiB in at most 65536 records: enough to
	// debug a connector, and a bound on what a looping one writes per call.
	minLogKiB, maxLogKiB           = 1, 1024
	minLogRecords, maxLogRecords   = 1, 65536
	minApprovalTTL, maxApprovalTTL = time.Second, 30 * 24 * time.Hour
	minMaxAttempts, maxMaxAttempts = 1, 20
	maxReconcileSettle             = 24 * time.Hour
	// A provider that forgets keys within a minute protects nothing; one
	// that claims more than a year is not believed either.
	minIdempotencyRetention, maxIdempotencyRetention = time.Minute, 366 * 24 * time.Hour
)

var (
	connectorNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	operationNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	configKeyRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	sha256RE        = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// versionRE is semver 2.0 without the leading-zero rules.
	versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
)

// ValidConnectorName reports whether name may be a [connector].name: lower
// case letters, digits, '-' and '_', starting with a letter, at most 32.
func ValidConnectorName(name string) bool { return connectorNameRE.MatchString(name) }

// Load reads and parses the manifest at path. Errors are a *ValidationError
// (wrapping ErrInvalid) or the read error.
func Load(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("manifests: load: %w", err)
	}
	return Parse(path, data)
}

// ProbeConfigSuffix ends the name of a crashtest probe config, which by
// convention lives next to its manifest (manifests/<connector>.probe.toml)
// and is no manifest: LoadDir skips it.
const ProbeConfigSuffix = ".probe.toml"

// Files returns the manifest files directly in dir: every "*.toml" but
// probe configs (ProbeConfigSuffix), sorted by file name.
func Files(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.toml"))
	if err != nil {
		return nil, err
	}
	paths = slices.DeleteFunc(paths, func(p string) bool { return strings.HasSuffix(p, ProbeConfigSuffix) })
	slices.Sort(paths)
	return paths, nil
}

// LoadDir loads every manifest file directly in dir (see Files), sorted
// by file name. It reports the problems of every file at once (errors.Join
// of the per-file errors) and returns no manifests if any file fails, or
// if two files declare the same connector name (ErrDuplicateConnector).
func LoadDir(dir string) ([]*Manifest, error) {
	paths, err := Files(dir)
	if err != nil {
		return nil, fmt.Errorf("manifests: load dir %s: %w", dir, err)
	}
	var (
		ms   []*Manifest
		errs []error
		seen = map[string]string{}
	)
	for _, p := range paths {
		m, err := Load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, ok := seen[m.Connector.Name]; ok {
			errs = append(errs, fmt.Errorf("%w %q: declared by %s and %s", ErrDuplicateConnector, m.Connector.Name, first, p))
			continue
		}
		seen[m.Connector.Name] = p
		ms = append(ms, m)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ms, nil
}

// Operation returns the named operation and whether the manifest declares
// it.
func (m *Manifest) Operation(name string) (*Operation, bool) {
	for _, op := range m.Operations {
		if op.Name == name {
			return op, true
		}
	}
	return nil, false
}

// ModulePath resolves the module file against moduleDir. With moduleDir ""
// the module is looked up next to the manifest file.
func (m *Manifest) ModulePath(moduleDir string) string {
	if moduleDir == "" {
		moduleDir = filepath.Dir(m.Path)
	}
	return filepath.Join(moduleDir, m.Connector.Module)
}

// Parse parses and validates a manifest. name is used in error messages and
// stored as Manifest.Path. Every problem found is reported at once in a
// *ValidationError; Parse never returns a manifest together with an error.
// Limits and per-operation defaults are filled in; every input schema is
// compiled.
func Parse(name string, data []byte) (*Manifest, error) {
	var top struct {
		Connector    toml.Primitive `toml:"connector"`
		Capabilities toml.Primitive `toml:"capabilities"`
		Limits       toml.Primitive `toml:"limits"`
		Provider     toml.Primitive `toml:"provider"`
		Operation    toml.Primitive `toml:"operation"`
	}
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	text := newFileText(data)
	p := &parser{
		file:  name,
		lines: text.index,
		text:  text,
		md:    &md,
	}
	sum := sha256.Sum256(data)
	m := &Manifest{Path: name, Digest: hex.EncodeToString(sum[:]), text: text}

	p.connector(&m.Connector, top.Connector)
	p.capabilities(&m.Capabilities, top.Capabilities)
	p.limits(&m.Limits, top.Limits)
	p.provider(&m.Provider, top.Provider)
	m.Operations = p.operations(m, top.Operation)
	p.unknownKeys()

	if len(p.problems) > 0 {
		slices.SortStableFunc(p.problems, func(a, b Problem) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column)) })
		return nil, &ValidationError{File: name, Problems: p.problems}
	}
	return m, nil
}

// syntaxError turns a toml decoding error into a *ValidationError.
func syntaxError(name string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &ValidationError{
			File:     name,
			Problems: []Problem{{Line: pe.Position.Line, Column: pe.Position.Col, Msg: "toml: " + pe.Message}},
			syntax:   pe,
		}
	}
	// Not expected: the top level decodes into Primitives only.
	return &ValidationError{File: name, Problems: []Problem{{Msg: err.Error()}}}
}

// parser collects problems while turning raw TOML values into a Manifest.
type parser struct {
	file     string
	lines    lineIndex
	text     *fileText
	md       *toml.MetaData
	problems []Problem
	opLabels []string // field label of each operation, by index
}

func (p *parser) add(line int, field, format string, args ...any) {
	p.problems = append(p.problems, Problem{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// table decodes a Primitive holding a table into a map of raw values. It
// reports a problem when the value is not a table. Absent tables yield
// (nil, false). (PrimitiveDecode into a map silently ignores a non-table
// value, so the value is decoded into any and checked here.)
func (p *parser) table(prim toml.Primitive, path, field string) (map[string]any, bool) {
	if !p.md.IsDefined(path) {
		return nil, false
	}
	var v any
	err := p.md.PrimitiveDecode(prim, &v)
	raw, ok := v.(map[string]any)
	if err != nil || !ok {
		p.add(p.lines.line(path, path+"#0"), field, "want table, got %s", tomlType(v))
		return nil, false
	}
	return raw, true
}

// field is one raw value with its location.
type field struct {
	v     any
	set   bool
	line  int
	label string
}

// get returns the raw value of key in raw; tablePath is the lineIndex path of
// the table, label its name in messages.
func (p *parser) get(raw map[string]any, tablePath, label, key string) field {
	v, ok := raw[key]
	return field{
		v:     v,
		set:   ok,
		line:  p.lines.line(tablePath+"."+key, tablePath),
		label: label + "." + key,
	}
}

func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case time.Time:
		return "datetime"
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "table"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func (p *parser) str(f field, required bool) (string, bool) {
	if !f.set {
		if required {
			p.add(f.line, f.label, "missing required value")
		}
		return "", false
	}
	s, ok := f.v.(string)
	if !ok {
		p.add(f.line, f.label, "want string, got %s", tomlType(f.v))
	}
	return s, ok
}

func (p *parser) integer(f field, required bool, lo, hi, def int) int {
	if !f.set {
		if required {
			p.add(f.line, f.label, "missing required value")
		}
		return def
	}
	n, ok := f.v.(int64)
	if !ok {
		p.add(f.line, f.label, "want integer, got %s", tomlType(f.v))
		return def
	}
	if n < int64(lo) || n > int64(hi) {
		p.add(f.line, f.label, "%d out of range %d..%d", n, lo, hi)
		return def
	}
	return int(n)
}

func (p *parser) boolean(f field) bool {
	if !f.set {
		return false
	}
	b, ok := f.v.(bool)
	if !ok {
		p.add(f.line, f.label, "want boolean, got %s", tomlType(f.v))
	}
	return b
}

func (p *parser) duration(f field, lo, hi, def time.Duration) time.Duration {
	if !f.set {
		return def
	}
	s, ok := f.v.(string)
	if !ok {
		p.add(f.line, f.label, "want duration string such as %q, got %s", FormatDuration(def), tomlType(f.v))
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.add(f.line, f.label, "invalid duration %q (want e.g. %q)", s, FormatDuration(def))
		return def
	}
	if d < lo || d > hi {
		p.add(f.line, f.label, "%s out of range %s..%s", s, FormatDuration(lo), FormatDuration(hi))
		return def
	}
	return d
}

func (p *parser) strings(f field) []string {
	if !f.set {
		return nil
	}
	arr, ok := f.v.([]any)
	if !ok {
		p.add(f.line, f.label, "want array of strings, got %s", tomlType(f.v))
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			p.add(f.line, fmt.Sprintf("%s[%d]", f.label, i), "want string, got %s", tomlType(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (p *parser) connector(c *Connector, prim toml.Primitive) {
	raw, ok := p.table(prim, "connector", "connector")
	if !ok {
		if !p.md.IsDefined("connector") {
			p.add(0, "connector", "missing required table [connector]")
		}
		return
	}
	get := func(k string) field { return p.get(raw, "connector", "connector", k) }

	{
		f := get("name")
		if s, ok := p.str(f, true); ok {
			if !connectorNameRE.MatchString(s) {
				p.add(f.line, f.label, "%q must match %s", s, connectorNameRE)
			}
			c.Name = s
		}
	}
	{
		f := get("version")
		if s, ok := p.str(f, true); ok {
			if !versionRE.MatchString(s) {
				p.add(f.line, f.label, "%q is not a semantic version (want e.g. \"1.0.0\")", s)
			}
			c.Version = s
		}
	}
	if f := get("abi"); f.set {
		if n, ok := f.v.(int64); !ok {
			p.add(f.line, f.label, "want integer, got %s", tomlType(f.v))
		} else if n != abi.Version {
			p.add(f.line, f.label, "abi %d not supported: connhost implements abi %d", n, abi.Version)
		} else {
			c.ABI = int(n)
		}
	} else {
		p.add(f.line, f.label, "missing required value")
	}
	{
		f := get("module")
		if s, ok := p.str(f, true); ok {
			switch {
			case s == "" || strings.ContainsAny(s, `/\`) || s == "." || s == ".." || strings.HasPrefix(s, "."):
				p.add(f.line, f.label, "%q must be a plain file name (no directories)", s)
			case !strings.HasSuffix(s, ".wasm"):
				p.add(f.line, f.label, "%q must end in .wasm", s)
			}
			c.Module = s
		}
	}
	if f := get("sha256"); f.set {
		if s, ok := p.str(f, false); ok {
			if s != "" && !sha256RE.MatchString(s) {
				p.add(f.line, f.label, "must be 64 lower-case hex characters or empty (unpinned)")
			}
			c.SHA256 = s
		}
	}
}

func (p *parser) capabilities(c *Capabilities, prim toml.Primitive) {
	raw, ok := p.table(prim, "capabilities", "capabilities")
	if !ok {
		return
	}
	f := p.get(raw, "capabilities", "capabilities", "http")
	seen := map[string]bool{}
	for i, o := range p.strings(f) {
		label := fmt.Sprintf("%s[%d]", f.label, i)
		if msg := checkOrigin(o); msg != "" {
			p.add(f.line, label, "%q: %s", o, msg)
		} else if seen[o] {
			p.add(f.line, label, "%q listed twice", o)
		}
		seen[o] = true
		c.HTTP = append(c.HTTP, o)
	}
	f = p.get(raw, "capabilities", "capabilities", "config")
	seen = map[string]bool{}
	for i, k := range p.strings(f) {
		label := fmt.Sprintf("%s[%d]", f.label, i)
		if !configKeyRE.MatchString(k) {
			p.add(f.line, label, "%q must match %s", k, configKeyRE)
		} else if seen[k] {
			p.add(f.line, label, "%q listed twice", k)
		}
		seen[k] = true
		c.Config = append(c.Config, k)
	}
	f = p.get(raw, "capabilities", "capabilities", "config_optional")
	seenOpt := map[string]bool{}
	for i, k := range p.strings(f) {
		label := fmt.Sprintf("%s[%d]", f.label, i)
		switch {
		case !seen[k]:
			p.add(f.line, label, "%q is not in capabilities.config (list every key there; config_optional marks those the connector works without)", k)
		case seenOpt[k]:
			p.add(f.line, label, "%q listed twice", k)
		}
		seenOpt[k] = true
		c.ConfigOptional = append(c.ConfigOptional, k)
	}
}

// checkOrigin returns "" when o is "scheme://host:port" with scheme http
// or https, a literal host name or IP, an explicit port, and nothing else.
func checkOrigin(o string) string {
	if strings.Contains(o, "*") {
		return "wildcards are not allowed; list every host"
	}
	if !strings.Contains(o, "://") {
		return `want "scheme://host:port"`
	}
	u, err := url.Parse(o)
	if err != nil {
		return "not a URL"
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "scheme must be http or https"
	case u.Opaque != "" || u.Host == "":
		return `want "scheme://host:port"`
	case u.User != nil:
		return "userinfo is not allowed"
	case u.Path != "" || u.RawPath != "":
		return "path is not allowed"
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(o, "?"):
		return "query is not allowed"
	case u.Fragment != "" || strings.Contains(o, "#"):
		return "fragment is not allowed"
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "" {
		return "explicit port required (e.g. :443)"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
		return "port must be 1..65535"
	}
	if host == "" {
		return "host is empty"
	}
	if host != strings.ToLower(host) {
		return "host must be lower case"
	}
	if net.ParseIP(host) == nil {
		for _, label := range strings.Split(host, ".") {
			if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" ||
				label[0] == '-' || label[len(label)-1] == '-' {
				return "invalid host name"
			}
		}
	}
	return ""
}

func (p *parser) limits(l *Limits, prim toml.Primitive) {
	l.MemoryMiB, l.Timeout, l.MaxOutputKiB, l.Instances = DefaultMemoryMiB, DefaultTimeout, DefaultMaxOutputKiB, DefaultInstances
	l.LogKiB, l.LogRecords = DefaultLogKiB, DefaultLogRecords
	raw, ok := p.table(prim, "limits", "limits")
	if !ok {
		return
	}
	get := func(k string) field { return p.get(raw, "limits", "limits", k) }
	l.MemoryMiB = p.integer(get("memory_mib"), false, minMemoryMiB, maxMemoryMiB, DefaultMemoryMiB)
	l.Timeout = p.duration(get("timeout"), minTimeout, maxTimeout, DefaultTimeout)
	l.MaxOutputKiB = p.integer(get("max_output_kib"), false, minMaxOutputKiB, maxMaxOutputKiB, DefaultMaxOutputKiB)
	l.Instances = p.integer(get("instances"), false, minInstances, maxInstances, DefaultInstances)
	l.LogKiB = p.integer(get("log_kib"), false, minLogKiB, maxLogKiB, DefaultLogKiB)
	l.LogRecords = p.integer(get("log_records"), false, minLogRecords, maxLogRecords, DefaultLogRecords)
}

func (p *parser) provider(pv *Provider, prim toml.Primitive) {
	raw, ok := p.table(prim, "provider", "provider")
	if !ok {
		return
	}
	get := func(k string) field { return p.get(raw, "provider", "provider", k) }
	if s, ok := p.str(get("name"), false); ok {
		pv.Name = s
	}
	hf := get("idempotency_header")
	if s, ok := p.str(hf, false); ok {
		if !httpTokenRE.MatchString(s) {
			p.add(hf.line, hf.label, "%q is not an HTTP header name", s)
		}
		pv.IdempotencyHeader = s
	}
	ff := get("idempotency_field")
	if s, ok := p.str(ff, false); ok {
		if !bodyFieldRE.MatchString(s) {
			p.add(ff.line, ff.label, "%q is not a body field: names of letters, digits, _ and - (a JSON body's nested field joined by dots, a form's field as sent, e.g. metadata[key])", s)
		}
		pv.IdempotencyField = s
	}
	sf := get("search")
	if s, ok := p.str(sf, false); ok {
		if err := checkSearch(s); err != nil {
			p.add(sf.line, sf.label, "%v", err)
		}
		pv.Search = s
	}
	rf := get("idempotency_retention")
	pv.IdempotencyRetention = p.duration(rf, minIdempotencyRetention, maxIdempotencyRetention, 0)
	switch {
	case hf.set && ff.set:
		p.add(ff.line, ff.label, "the provider deduplicates by one key: declare idempotency_header or idempotency_field, not both")
	case (hf.set || ff.set) && !rf.set:
		line := hf.line
		if ff.set {
			line = ff.line
		}
		p.add(line, "provider.idempotency_retention", "missing: say how long the provider remembers a key (e.g. \"24h\"); the host re-dispatches only within it")
	case rf.set && !hf.set && !ff.set:
		p.add(rf.line, rf.label, "applies only with provider.idempotency_header or provider.idempotency_field")
	}
}

// bodyFieldRE matches a body field that carries a key: JSON names joined
// by dots, or a form field with brackets.
var bodyFieldRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\[[A-Za-z0-9_-]+\])*(\.[A-Za-z0-9_-]+(\[[A-Za-z0-9_-]+\])*)*$`)

// httpTokenRE matches an RFC 9110 token (a header field name).
var httpTokenRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (p *parser) operations(m *Manifest, prim toml.Primitive) []*Operation {
	if !p.md.IsDefined("operation") {
		p.add(0, "operation", "at least one [[operation]] is required")
		return nil
	}
	var prims []toml.Primitive
	if err := p.md.PrimitiveDecode(prim, &prims); err != nil {
		p.add(p.lines.line("operation", "operation#0"), "operation", "must be an array of tables ([[operation]])")
		return nil
	}
	if len(prims) == 0 {
		p.add(p.lines.line("operation"), "operation", "at least one [[operation]] is required")
		return nil
	}
	var (
		ops   []*Operation
		first = map[string]int{}
	)
	for i, prim := range prims {
		tablePath := "operation#" + strconv.Itoa(i)
		var v any
		err := p.md.PrimitiveDecode(prim, &v)
		raw, ok := v.(map[string]any)
		if err != nil || !ok {
			p.opLabels = append(p.opLabels, fmt.Sprintf("operation[#%d]", i+1))
			p.add(p.lines.line(tablePath, "operation"), fmt.Sprintf("operation[#%d]", i+1), "must be a table")
			continue
		}
		op := p.operation(m, raw, i, tablePath)
		if op.Name != "" {
			if line, dup := first[op.Name]; dup {
				p.add(op.Line, "operation["+op.Name+"].name", "duplicate operation name (first declared at line %d)", line)
			} else {
				first[op.Name] = op.Line
			}
		}
		ops = append(ops, op)
	}
	return ops
}

func (p *parser) operation(m *Manifest, raw map[string]any, i int, tablePath string) *Operation {
	op := &Operation{
		Line:        p.lines.line(tablePath),
		text:        p.text,
		table:       tablePath,
		ApprovalTTL: DefaultApprovalTTL,
		MaxAttempts: DefaultMaxAttempts,
		connector:   m.Connector.Name,
		version:     m.Connector.Version,
		provider:    m.Provider,
	}
	label := fmt.Sprintf("operation[#%d]", i+1)
	if s, ok := raw["name"].(string); ok && operationNameRE.MatchString(s) {
		label = "operation[" + s + "]"
	}
	p.opLabels = append(p.opLabels, label)
	get := func(k string) field { return p.get(raw, tablePath, label, k) }

	{
		f := get("name")
		if s, ok := p.str(f, true); ok {
			if !operationNameRE.MatchString(s) {
				p.add(f.line, f.label, "%q must match %s", s, operationNameRE)
			}
			op.Name = s
		}
	}
	{
		f := get("description")
		if s, ok := p.str(f, true); ok {
			if strings.TrimSpace(s) == "" {
				p.add(f.line, f.label, "must not be empty: the model reads it to choose the tool")
			}
			op.Description = s
		}
	}
	{
		f := get("effect")
		if s, ok := p.str(f, true); ok {
			op.Effect = Effect(s)
			if op.Effect != EffectExternal && op.Effect != EffectRead {
				p.add(f.line, f.label, "%q: want %q or %q", s, EffectExternal, EffectRead)
			}
		}
	}
	{
		f := get("recovery")
		s, ok := p.str(f, false)
		op.Recovery = Policy(s)
		switch {
		case !f.set && op.Effect == EffectExternal:
			p.add(f.line, f.label, "missing required value for an external operation (want %q, %q or %q)",
				PolicyManual, PolicyIdempotentRetry, PolicyReconcile)
		case !ok:
		case op.Recovery != PolicyManual && op.Recovery != PolicyIdempotentRetry && op.Recovery != PolicyReconcile:
			p.add(f.line, f.label, "%q: want %q, %q or %q", s, PolicyManual, PolicyIdempotentRetry, PolicyReconcile)
		case op.Effect == EffectRead && op.Recovery != PolicyManual:
			p.add(f.line, f.label, "%q is meaningless for a read operation (omit it, or use %q)", s, PolicyManual)
		}
	}
	op.RequiresApproval = p.boolean(get("requires_approval"))
	op.ApprovalTTL = p.duration(get("approval_ttl"), minApprovalTTL, maxApprovalTTL, DefaultApprovalTTL)
	op.MaxAttempts = p.integer(get("max_attempts"), false, minMaxAttempts, maxMaxAttempts, DefaultMaxAttempts)
	{
		f := get("reconcile_settle")
		op.ReconcileSettle = p.duration(f, 0, maxReconcileSettle, 2*m.Limits.Timeout)
		if f.set && op.Recovery != PolicyReconcile {
			p.add(f.line, f.label, "applies only to recovery = %q (this operation declares %q)", PolicyReconcile, op.Recovery)
		}
	}
	{
		f := get("outcome_durability")
		rederived := op.Recovery == PolicyIdempotentRetry || op.Recovery == PolicyReconcile
		op.OutcomeDurability = DurabilitySync
		if rederived {
			op.OutcomeDurability = DurabilityLazy
		}
		if s, ok := p.str(f, false); ok && f.set {
			switch d := Durability(s); {
			case d != DurabilitySync && d != DurabilityLazy:
				p.add(f.line, f.label, "%q: want %q or %q", s, DurabilitySync, DurabilityLazy)
			case d == DurabilityLazy && !rederived:
				p.add(f.line, f.label, "%q needs recovery %q or %q, whose recovery re-derives a lost outcome (this operation declares %q)",
					s, PolicyIdempotentRetry, PolicyReconcile, op.Recovery)
			default:
				op.OutcomeDurability = d
			}
		}
	}
	{
		f := get("input_schema")
		if s, ok := p.str(f, true); ok {
			op.InputSchema = s
			sch, probs := compileSchema(m.Connector.Name, op.Name, s)
			for _, pr := range probs {
				pos := Pos{Line: f.line}
				if loc, ok := p.text.stringValue(tablePath + ".input_schema"); ok && pr.off >= 0 {
					pos = loc.pos(pr.off)
				}
				p.problems = append(p.problems, Problem{Line: pos.Line, Column: pos.Col, Field: f.label, Msg: pr.msg})
			}
			op.schema = sch
		}
	}
	p.reviewKeys(op, op.schema, get)
	return op
}

// knownTables are the tables whose keys are checked for unknown names.
var knownTables = map[string]bool{"connector": true, "capabilities": true, "limits": true, "provider": true, "operation": true}

var knownKeys = map[string]bool{
	"connector.name": true, "connector.version": true, "connector.abi": true, "connector.module": true, "connector.sha256": true,
	"capabilities.http": true, "capabilities.config": true, "capabilities.config_optional": true,
	"limits.memory_mib": true, "limits.timeout": true, "limits.max_output_kib": true, "limits.instances": true,
	"limits.log_kib": true, "limits.log_records": true,
	"provider.name": true, "provider.idempotency_header": true, "provider.idempotency_retention": true, "provider.idempotency_field": true,
	"provider.search": true, "operation.name": true, "operation.description": true, "operation.effect": true, "operation.recovery": true,
	"operation.requires_approval": true, "operation.approval_ttl": true, "operation.max_attempts": true,
	"operation.input_schema": true, "operation.reconcile_settle": true, "operation.outcome_durability": true,
	"operation.review": true, "operation.money": true, "operation.duplicate_window": true, "operation.on_duplicate": true,
	"operation.intent": true,
}

// unknownKeys reports keys the manifest format does not define: top-level
// keys and tables, and keys inside the known tables. Keys nested below
// an unknown or mistyped key are not reported again.
func (p *parser) unknownKeys() {
	opIdx := -1
	for _, k := range p.md.Keys() {
		if len(k) == 1 && k[0] == "operation" {
			opIdx++
		}
		switch {
		case len(k) == 1 && !knownTables[k[0]]:
			p.add(p.lines.line(k[0]), k[0], "unknown key")
		case len(k) == 2 && knownTables[k[0]] && !knownKeys[k[0]+"."+k[1]]:
			tablePath, label := k[0], k[0]
			if k[0] == "operation" {
				tablePath = "operation#" + strconv.Itoa(max(opIdx, 0))
				label = p.opLabel(max(opIdx, 0))
			}
			p.add(p.lines.line(tablePath+"."+k[1], tablePath), label+"."+k[1], "unknown key")
		}
	}
}

// opLabel names the i-th operation the way its other problems do.
func (p *parser) opLabel(i int) string {
	if i < len(p.opLabels) {
		return p.opLabels[i]
	}
	return fmt.Sprintf("operation[#%d]", i+1)
}

// FormatDuration formats d as a manifest writes a duration, without zero
// trailing units: 1h, 10m, 1m30s, 1ms. Every place that shows a manifest's
// duration (the audit, the approval view, the CLI) uses it.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
