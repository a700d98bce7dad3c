// Package tooldefs turns connector manifests into the tool definitions that
// agent runtimes hand to models: OpenAI function tools, Anthropic tools and
// MCP tools. The HTTP API (GET /v1/tools) and the CLI (connhost tools) share
// it, so both print the same definitions.
//
// # Tool names
//
// connhost names a tool "connector.operation". OpenAI and Anthropic require
// tool names matching ^[a-zA-Z0-9_-]{1,64}$, which has no ".", so for those
// formats the name is mapped with [ModelName]: "." becomes "__"
// ("payments.create_payment" → "payments__create_payment"). [ToolName]
// maps back. The mapping is reversible for every manifest Build accepts:
// Build refuses a connector whose name contains "__" (the split would be
// ambiguous) and a mapped name longer than 64 characters. MCP allows "."
// in tool names, so MCP definitions keep "connector.operation".
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

// Separator replaces "." in model-facing tool names.
const Separator = "__"

// ErrFormat reports an unsupported format; ErrName a tool name that cannot
// be mapped to or from a model-facing name.
var (
	ErrFormat = errors.New("tooldefs: unknown format (want openai, anthropic or mcp)")
	ErrName   = errors.New("tooldefs: tool name cannot be mapped")
)

var modelNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

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

// ModelName maps "connector.operation" to the name OpenAI and Anthropic
// accept ("connector__operation"). It fails (ErrName) when the connector
// name contains "__" or the result does not match ^[a-zA-Z0-9_-]{1,64}$.
func ModelName(tool string) (string, error) {
	c, op, ok := strings.Cut(tool, ".")
	if !ok || c == "" || op == "" || strings.Contains(op, ".") {
		return "", fmt.Errorf("%w: %q is not \"connector.operation\"", ErrName, tool)
	}
	if strings.Contains(c, Separator) {
		return "", fmt.Errorf("%w: connector %q contains %q", ErrName, c, Separator)
	}
	n := c + Separator + op
	if !modelNameRE.MatchString(n) {
		return "", fmt.Errorf("%w: %q does not match %s", ErrName, n, modelNameRE)
	}
	return n, nil
}

// ToolName is the inverse of ModelName: it maps "connector__operation" back
// to "connector.operation", splitting at the first "__". A name that
// already contains "." is returned unchanged, so runtimes may pass either
// form.
func ToolName(name string) (string, error) {
	if strings.Contains(name, ".") {
		return name, nil
	}
	c, op, ok := strings.Cut(name, Separator)
	if !ok || c == "" || op == "" {
		return "", fmt.Errorf("%w: %q is neither \"connector.operation\" nor \"connector__operation\"", ErrName, name)
	}
	return c + "." + op, nil
}

// Tool is one tool in a format-neutral form.
type Tool struct {
	// Name is "connector.operation".
	Name string
	// Description is the operation's description from the manifest.
	Description string
	// Parameters is the operation's JSON Schema (compact JSON).
	Parameters json.RawMessage
	// RequiresApproval and Effect are informative; they are not sent to
	// the model.
	RequiresApproval bool
	Effect           string
}

// Tools lists the tools of the manifests, sorted by name. It reports every
// operation whose name cannot be mapped for OpenAI and Anthropic.
func Tools(ms []*manifests.Manifest) ([]Tool, error) {
	var (
		out  []Tool
		errs []error
	)
	for _, m := range ms {
		for _, op := range m.Operations {
			name := m.Connector.Name + "." + op.Name
			if _, err := ModelName(name); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, Tool{
				Name: name, Description: op.Description, Parameters: op.SchemaJSON(),
				RequiresApproval: op.RequiresApproval, Effect: string(op.Effect),
			})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
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
	// Name is "connector.operation" (MCP allows "." in tool names).
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
)

type mcpList struct {
	Tools []MCPTool `json:"tools"`
}

// MCPTools lists the tools of the manifests as connhost's MCP server
// lists them, sorted by name.
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
		meta := map[string]any{MetaEffect: string(op.Effect), MetaRequiresApproval: op.RequiresApproval}
		if op.Recovery != "" {
			meta[MetaRecovery] = string(op.Recovery)
		}
		out = append(out, MCPTool{
			Name: t.Name, Title: Title(conn, op), Description: t.Description, InputSchema: t.Parameters,
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
			n, _ := ModelName(t.Name)
			out = append(out, openAITool{Type: "function", Function: openAIFunction{Name: n, Description: t.Description, Parameters: t.Parameters}})
		}
		return out, nil
	case FormatAnthropic:
		out := make([]anthropicTool, 0, len(tools))
		for _, t := range tools {
			n, _ := ModelName(t.Name)
			out = append(out, anthropicTool{Name: n, Description: t.Description, InputSchema: t.Parameters})
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
