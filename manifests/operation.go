package manifests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// maxSchemaBytes bounds an input_schema text.
const maxSchemaBytes = 1 << 20

// schemaProblem is one thing wrong with an input schema; off is the byte
// offset in the schema text it is about (-1: the schema as a whole).
type schemaProblem struct {
	off int
	msg string
}

// compileSchema compiles an input schema: valid JSON, an object schema
// ("type": "object"), Draft 2020-12 unless "$schema" says otherwise, format
// assertions on, and no external references ($ref to files or URLs is
// refused: a manifest must be self-contained). Problems carry the offset
// in text they are about, so the parser can report them at their line and
// column in the manifest.
func compileSchema(connector, op, text string) (*jsonschema.Schema, []schemaProblem) {
	if len(text) > maxSchemaBytes {
		return nil, []schemaProblem{{-1, fmt.Sprintf("schema larger than %d bytes", maxSchemaBytes)}}
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		msg := err.Error()
		if strings.HasPrefix(msg, "invalid character after top-level value") {
			msg = "data after the schema's closing brace"
		}
		return nil, []schemaProblem{{jsonSyntaxOffset(text), "schema is not valid JSON: " + msg}}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, []schemaProblem{{0, "schema must be a JSON object"}}
	}
	if !isObjectType(obj["type"]) {
		off := -1
		if o, ok := jsonPointerOffsets(text)["/type"]; ok {
			off = o
		}
		return nil, []schemaProblem{{off, `schema must declare "type": "object" (arguments are a JSON object)`}}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file or network access
	loc := "urn:connhost:" + connector + ":" + op
	if err := c.AddResource(loc, doc); err != nil {
		return nil, compileProblems(text, loc, err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, compileProblems(text, loc, err)
	}
	return sch, nil
}

// compileProblems turns a compiler error into readable problems: a
// metaschema violation becomes one sentence per offending keyword, at that
// keyword; a reference the schema cannot resolve is reported where it is
// written.
func compileProblems(text, loc string, err error) []schemaProblem {
	offs := jsonPointerOffsets(text)
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		var out []schemaProblem
		seen := map[string]bool{}
		for _, leaf := range metaschemaLeaves(ve) {
			ptr := "/" + strings.Join(escapeAll(leaf.InstanceLocation), "/")
			if len(leaf.InstanceLocation) == 0 {
				ptr = ""
			}
			if seen[ptr] {
				continue // one sentence per keyword
			}
			seen[ptr] = true
			where := "schema"
			if ptr != "" {
				where = "schema keyword " + ptr
			}
			off := -1
			if o, ok := offs[ptr]; ok {
				off = o
			}
			msg := "invalid"
			if u := leaf.BasicOutput(); u != nil && u.Error != nil {
				msg = u.Error.String()
			}
			out = append(out, schemaProblem{off, fmt.Sprintf("%s is not valid JSON Schema: %s", where, msg)})
		}
		if len(out) > 0 {
			return out
		}
	}
	msg := oneLine(strings.ReplaceAll(err.Error(), loc, ""))
	var lue *jsonschema.LoadURLError
	var pnf *jsonschema.JSONPointerNotFoundError
	switch {
	case errors.As(err, &lue):
		return []schemaProblem{{quotedOffset(text, lue.URL),
			fmt.Sprintf("schema refers to %s: a manifest's schemas must be self-contained (no $ref to files or URLs)", lue.URL)}}
	case errors.As(err, &pnf):
		ref := strings.TrimPrefix(pnf.URL, loc)
		return []schemaProblem{{quotedOffset(text, ref), fmt.Sprintf("schema refers to %s, which it does not define", ref)}}
	}
	return []schemaProblem{{-1, "schema does not compile: " + msg}}
}

// metaschemaLeaves returns the errors of a metaschema violation that have
// no causes, in order. Of the alternatives of an anyOf or oneOf only the
// first is followed: the others restate the same mistake from another
// angle ("want array" after "must be one of …").
func metaschemaLeaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	switch ve.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		return metaschemaLeaves(ve.Causes[0])
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, metaschemaLeaves(c)...)
	}
	return out
}

func escapeAll(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = escapePointer(t)
	}
	return out
}

// quotedOffset returns the offset of the JSON string s in text, or -1.
func quotedOffset(text, s string) int {
	q, _ := json.Marshal(s)
	return strings.Index(text, string(q))
}

func isObjectType(t any) bool {
	switch t := t.(type) {
	case string:
		return t == "object"
	case []any:
		return len(t) == 1 && t[0] == "object"
	}
	return false
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Schema returns the compiled input schema, compiling InputSchema on first
// use for an Operation not built by Parse (nil if it does not compile).
// The compiled schema is safe for concurrent use.
func (op *Operation) Schema() *jsonschema.Schema {
	if op.schema == nil {
		op.schema, _ = compileSchema(op.connector, op.Name, op.InputSchema)
	}
	return op.schema
}

// SchemaJSON returns the input schema as compact JSON, the form handed to
// models as the tool's parameters.
func (op *Operation) SchemaJSON() json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(op.InputSchema)); err != nil {
		return json.RawMessage(op.InputSchema)
	}
	return json.RawMessage(b.Bytes())
}

// ValidateArgs checks args against the input schema. args must be one JSON
// object. The error is an *ArgsError (wrapping ErrInvalidArgs) listing
// every failing path. It is safe for concurrent use once Schema has been
// called (Parse does).
func (op *Operation) ValidateArgs(args []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &ArgsError{Operation: op.Name, Problems: []ArgProblem{{Msg: "not valid JSON: " + err.Error()}}}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return &ArgsError{Operation: op.Name, Problems: []ArgProblem{{Msg: "arguments must be a JSON object"}}}
	}
	return op.ValidateDoc(obj)
}

// ValidateDoc is ValidateArgs for arguments already decoded the way
// jsonschema.UnmarshalJSON decodes them (numbers as json.Number), so a
// caller that parses the arguments anyway does not parse them twice.
func (op *Operation) ValidateDoc(doc map[string]any) error {
	sch := op.Schema()
	if sch == nil {
		return &ArgsError{Operation: op.Name, Problems: []ArgProblem{{Msg: "operation has no valid input schema"}}}
	}
	err := sch.Validate(doc)
	if err == nil {
		return op.integerSpellings(sch, doc)
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ArgsError{Operation: op.Name, Problems: []ArgProblem{{Msg: oneLine(err.Error())}}}
	}
	var probs []ArgProblem
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		switch u.Error.Kind.(type) {
		case *kind.Schema, *kind.Group, *kind.Reference:
			continue // containers: their causes follow in the flat list
		}
		p := ArgProblem{Path: u.InstanceLocation, Msg: u.Error.String()}
		if !slices.Contains(probs, p) {
			probs = append(probs, p)
		}
	}
	if len(probs) == 0 {
		probs = []ArgProblem{{Msg: oneLine(err.Error())}}
	}
	slices.SortStableFunc(probs, func(a, b ArgProblem) int { return strings.Compare(a.Path, b.Path) })
	return &ArgsError{Operation: op.Name, Problems: probs}
}

// PolicyVersion is a short hex digest (16 characters) of everything that
// decides what the host may do with a call of this operation: connector
// name and version, operation name, effect, recovery policy, approval
// requirement and TTL, attempt cap, and for an idempotent-retry operation
// the provider's declared idempotency header (or body field) and retention (when the
// manifest declares them; a manifest without [provider] keeps the version
// it had before the table existed). Intents and approvals record it so
// that an approval is bound to the exact policy it was given under: any
// change to those values yields another version. The description and the
// input schema are not part of it (the input digest binds the arguments).
func (op *Operation) PolicyVersion() string {
	h := sha256.New()
	parts := []string{
		"connhost-policy/v1",
		op.connector, op.version, op.Name,
		string(op.Effect), string(op.Recovery),
		strconv.FormatBool(op.RequiresApproval),
		strconv.FormatInt(int64(op.ApprovalTTL), 10),
		strconv.Itoa(op.MaxAttempts),
	}
	if op.Recovery == PolicyIdempotentRetry && op.provider.IdempotencyHeader != "" {
		parts = append(parts, "provider-idempotency", op.provider.IdempotencyHeader,
			strconv.FormatInt(int64(op.provider.IdempotencyRetention), 10))
	}
	if op.Recovery == PolicyIdempotentRetry && op.provider.IdempotencyField != "" {
		parts = append(parts, "provider-idempotency-field", op.provider.IdempotencyField,
			strconv.FormatInt(int64(op.provider.IdempotencyRetention), 10))
	}
	for _, s := range parts {
		// Length-prefix each part so that no two tuples collide.
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
