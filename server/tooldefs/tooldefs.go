// Package tooldefs turns connector manifests into the tool definitions that
// agent runtimes hand to models: OpenAI function tools, Anthropic tools and
// MCP tools. The HTTP API (GET /v1/tools) and the CLI (connhost tools) share
// it, so both print the same definitions.
//
// # Tool names
//
// Inside connhost (the ledger, the audit trail, host.ToolCall.Tool) a tool
// is "connector.operation". Model APIs are stricter: OpenAI and Anthropic
// require tool names matching ^[a-zA-Z0-9_-]{1,64}$, and a runtime that
// hands MCP tools to such a model passes their names through. So every
// format, MCP included, names a tool [ModelName]: connector and operation
// joined by "_" ("payments.create_payment" → "payments_create_payment").
// Two tools that would get one name ("a_b" + "c" and "a" + "b_c"), or a
// name longer than 64 characters, make [Tools] fail: the manifests do not
// load. [NamesOf] resolves every name a caller may use: the model name, the
// dotted name, and the "connector__operation" form these formats used
// before, so calls by the old names keep working.
package tooldefs

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/connhost/connhost/manifests"
)

// Format is a tool-definition dialect.
type Format string

// Formats Build supports.
const (
	// FormatOpenAI is the OpenAI Chat Completions "tools" array:
	// [{"type":"function","function":{"name","description","parameters"}}].
	FormatOpenAI Format = "openai"
	// FormatAnthropic is the Anthropic Messages "tools" array:
	// [{"name","description","input_schema"}].
	FormatAnthropic Format = "anthropic"
	// FormatMCP is the result of an MCP tools/list request:
	// {"tools":[{"name","title","description","inputSchema","annotations","_meta"}]},
	// exactly what connhost's MCP server lists (see MCPTools).
	FormatMCP Format = "mcp"
)

// Formats lists the supported formats.
var Formats = []Format{FormatOpenAI, FormatAnthropic, FormatMCP}

// Separator joins connector and operation in model-facing tool names.
const Separator = "_"

// oldSeparator joined them in the OpenAI and Anthropic formats before
// every format used Separator; NamesOf still resolves that form.
const oldSeparator = "__"

// ErrFormat reports an unsupported format; ErrName a tool name that cannot
// be mapped to a model-facing name, or two tools mapped to one name.
var (
	ErrFormat = errors.New("tooldefs: unknown format (want openai, anthropic or mcp)")
	ErrName   = errors.New("tooldefs: tool name cannot be mapped")
)

// ModelNameRE is what OpenAI, Anthropic and MCP clients bound to them
// accept as a tool name.
var ModelNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ParseFormat parses a format name; "" means openai.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return FormatOpenAI, nil
	}
	f := Format(strings.ToLower(s))
	if !slices.Contains(Formats, f) {
		return "", fmt.Errorf("%w: %q", ErrFormat, s)
	}
	return f, nil
}

// ModelName maps "connector.operation" to the name every format uses
// ("connector_operation"). It fails (ErrName) when tool is not
// "connector.operation" or the result does not match ModelNameRE.
func ModelName(tool string) (string, error) {
	c, op, ok := strings.Cut(tool, ".")
	if !ok || c == "" || op == "" || strings.Contains(op, ".") {
		return "", fmt.Errorf("%w: %q is not \"connector.operation\"", ErrName, tool)
	}
	n := c + Separator + op
	if !ModelNameRE.MatchString(n) {
		return "", fmt.Errorf("%w: %q (from %q) does not match %s", ErrName, n, tool, ModelNameRE)
	}
	return n, nil
}

// Names resolves the names callers use for the tools of a set of
// manifests to "connector.operation". It is safe for concurrent use.
type Names struct {
	canon map[string]string
}

// NamesOf builds the resolver of ms's tools. It fails (ErrName, every
// problem at once, with the manifests' files) where a tool cannot be
// named or two tools would share a model name.
func NamesOf(ms []*manifests.Manifest) (*Names, error) {
	type owner struct{ tool, path string }
	primary := map[string]owner{}
	var errs []error
	for _, m := range ms {
		for _, op := range m.Operations {
			tool := m.Connector.Name + "." + op.Name
			n, err := ModelName(tool)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where(m), err))
				continue
			}
			if prev, dup := primary[n]; dup {
				errs = append(errs, fmt.Errorf("%w: %s (%s) and %s (%s) would both be the tool %q; rename a connector or an operation",
					ErrName, prev.tool, prev.path, tool, where(m), n))
				continue
			}
			primary[n] = owner{tool, where(m)}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	canon := make(map[string]string, 3*len(primary))
	for n, o := range primary {
		canon[n] = o.tool
		canon[o.tool] = o.tool // the dotted name: unique, since names hold no "."
	}
	// The old "connector__operation" form, where it names one tool and
	// no model name is spelled so.
	seen := map[string]int{}
	for _, o := range primary {
		c, op, _ := strings.Cut(o.tool, ".")
		seen[c+oldSeparator+op]++
	}
	for _, o := range primary {
		c, op, _ := strings.Cut(o.tool, ".")
		old := c + oldSeparator + op
		if _, taken := canon[old]; !taken && seen[old] == 1 {
			canon[old] = o.tool
		}
	}
	return &Names{canon: canon}, nil
}

func where(m *manifests.Manifest) string {
	if m.Path != "" {
		return m.Path
	}
	return "connector " + m.Connector.Name
}

// Canonical returns the "connector.operation" of a tool called name: its
// model name ("payments_create_payment"), its dotted name, or the older
// "payments__create_payment". ok is false for a name no tool has.
func (n *Names) Canonical(name string) (tool string, ok bool) {
	tool, ok = n.canon[name]
	return tool, ok
}

// Tool is one tool in a format-neutral form.
type Tool struct {
	// Name is "connector.operation".
	Name string
	// ModelName is the name every format lists ("connector_operation").
	ModelName string
	// Description is the operation's description from the manifest.
	Description string
	// Parameters is the operation's JSON Schema (compact JSON).
	Parameters json.RawMessage
	// RequiresApproval and Effect are informative; they are not sent to
	// the model.
	RequiresApproval bool
	Effect           string
}

// Tools lists the tools of the manifests, sorted by name. It fails as
// NamesOf does: where an operation cannot be named, or two would share a
// name.
func Tools(ms []*manifests.Manifest) ([]Tool, error) {
	if _, err := NamesOf(ms); err != nil {
		return nil, err
	}
	var out []Tool
	for _, m := range ms {
		for _, op := range m.Operations {
			name := m.Connector.Name + "." + op.Name
			n, _ := ModelName(name)
			out = append(out, Tool{
				Name: name, ModelName: n, Description: op.Description, Parameters: op.SchemaJSON(),
				RequiresApproval: op.RequiresApproval, Effect: string(op.Effect),
			})
		}
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.ModelName, b.ModelName) })
	return out, nil
}

type openAITool struct {
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// MCPTool is one tool of an MCP tools/list result, as connhost's MCP
// server lists it.
type MCPTool struct {
	// Name is the model name ("connector_operation"); see ModelName.
	Name string `json:"name"`
	// Title is a display name for people: "Payments: create payment",
	// with " (needs approval)" for an operation that requires approval.
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// Annotations are derived from the manifest (see MCPAnnotations).
	Annotations MCPAnnotations `json:"annotations"`
	// Meta carries the manifest's declarations under io.connhost/ keys:
	// effect, recovery and requires_approval.
	Meta map[string]any `json:"_meta,omitempty"`
}

// MCPAnnotations are an MCP tool's behaviour hints, derived from the
// manifest:
//
//   - readOnlyHint: the operation's effect is "read".
//   - destructiveHint: true for every external operation (a manifest does
//     not say whether an effect only adds), false for reads.
//   - idempotentHint: true for reads only. connhost deduplicates a call
//     sent again under the same tool-call id, whatever the policy; the same
//     arguments under a new id are a new effect.
//   - openWorldHint: the connector may reach hosts outside connhost
//     (capabilities.http is not empty).
type MCPAnnotations struct {
	ReadOnlyHint    bool `json:"readOnlyHint"`
	DestructiveHint bool `json:"destructiveHint"`
	IdempotentHint  bool `json:"idempotentHint"`
	OpenWorldHint   bool `json:"openWorldHint"`
}

// The _meta keys of an MCP tool definition.
const (
	MetaEffect           = "io.connhost/effect"
	MetaRecovery         = "io.connhost/recovery"
	MetaRequiresApproval = "io.connhost/requires_approval"
	// MetaTool is the tool's "connector.operation", as the ledger, the
	// audit trail and host.Result.Tool name it.
	MetaTool = "io.connhost/tool"
)

type mcpList struct {
	Tools []MCPTool `json:"tools"`
}

// MCPTools lists the tools of the manifests as connhost's MCP server
// lists them, sorted by name. Each tool's _meta names its dotted form
// (MetaTool).
func MCPTools(ms []*manifests.Manifest) ([]MCPTool, error) {
	tools, err := Tools(ms)
	if err != nil {
		return nil, err
	}
	ops := map[string]*manifests.Operation{}
	openWorld := map[string]bool{}
	for _, m := range ms {
		openWorld[m.Connector.Name] = len(m.Capabilities.HTTP) > 0
		for _, op := range m.Operations {
			ops[m.Connector.Name+"."+op.Name] = op
		}
	}
	out := make([]MCPTool, 0, len(tools))
	for _, t := range tools {
		op := ops[t.Name]
		conn, _, _ := strings.Cut(t.Name, ".")
		read := op.Effect == manifests.EffectRead
		meta := map[string]any{MetaEffect: string(op.Effect), MetaRequiresApproval: op.RequiresApproval, MetaTool: t.Name}
		if op.Recovery != "" {
			meta[MetaRecovery] = string(op.Recovery)
		}
		out = append(out, MCPTool{
			Name: t.ModelName, Title: Title(conn, op), Description: t.Description, InputSchema: t.Parameters,
			Annotations: MCPAnnotations{ReadOnlyHint: read, DestructiveHint: !read, IdempotentHint: read, OpenWorldHint: openWorld[conn]},
			Meta:        meta,
		})
	}
	return out, nil
}

// Title is an operation's display name: "Payments: create payment", and
// " (needs approval)" when it requires approval.
func Title(connector string, op *manifests.Operation) string {
	words := func(s string) string {
		return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '-' }), " ")
	}
	c := words(connector)
	if c != "" {
		c = strings.ToUpper(c[:1]) + c[1:]
	}
	t := c + ": " + words(op.Name)
	if op.RequiresApproval {
		t += " (needs approval)"
	}
	return t
}

// Build returns the tool definitions of the manifests in format f, as a
// value ready for json.Marshal: a slice for openai and anthropic, an
// object {"tools": [...]} for mcp.
func Build(ms []*manifests.Manifest, f Format) (any, error) {
	tools, err := Tools(ms)
	if err != nil {
		return nil, err
	}
	switch f {
	case FormatOpenAI:
		out := make([]openAITool, 0, len(tools))
		for _, t := range tools {
			out = append(out, openAITool{Type: "function", Function: openAIFunction{Name: t.ModelName, Description: t.Description, Parameters: t.Parameters}})
		}
		return out, nil
	case FormatAnthropic:
		out := make([]anthropicTool, 0, len(tools))
		for _, t := range tools {
			out = append(out, anthropicTool{Name: t.ModelName, Description: t.Description, InputSchema: t.Parameters})
		}
		return out, nil
	case FormatMCP:
		mt, err := MCPTools(ms)
		if err != nil {
			return nil, err
		}
		return mcpList{Tools: mt}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrFormat, f)
}

// JSON is Build followed by indented json.Marshal, with a trailing newline.
func JSON(ms []*manifests.Manifest, f Format) ([]byte, error) {
	v, err := Build(ms, f)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("tooldefs: %w", err)
	}
	return append(b, '\n'), nil
}
