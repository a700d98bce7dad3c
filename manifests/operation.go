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

// compileSchema compiles an input schema: valid JSON, an object schema
// ("type": "object"), Draft 2020-12 unless "$schema" says otherwise, format
// assertions on, and no external references ($ref to files or URLs is
// refused: a manifest must be self-contained).
func compileSchema(connector, op, text string) (*jsonschema.Schema, error) {
	if len(text) > maxSchemaBytes {
		return nil, fmt.Errorf("schema larger than %d bytes", maxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("schema must be a JSON object")
	}
	if !isObjectType(obj["type"]) {
		return nil, errors.New(`schema must declare "type": "object" (arguments are a JSON object)`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file or network access
	loc := "urn:connhost:" + connector + ":" + op
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schema does not compile: %s", oneLine(err.Error()))
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %s", oneLine(err.Error()))
	}
	return sch, nil
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
		return nil
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
// requirement and TTL, and attempt cap. Intents and approvals record it so
// that an approval is bound to the exact policy it was given under: any
// change to those values yields another version. The description and the
// input schema are not part of it (the input digest binds the arguments).
func (op *Operation) PolicyVersion() string {
	h := sha256.New()
	for _, s := range []string{
		"connhost-policy/v1",
		op.connector, op.version, op.Name,
		string(op.Effect), string(op.Recovery),
		strconv.FormatBool(op.RequiresApproval),
		strconv.FormatInt(int64(op.ApprovalTTL), 10),
		strconv.Itoa(op.MaxAttempts),
	} {
		// Length-prefix each part so that no two tuples collide.
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
