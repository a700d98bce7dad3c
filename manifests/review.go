package manifests

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// What a reviewer is shown, and what a repeated call meets: the operation
// keys review, money, duplicate_window, on_duplicate and intent. None of them is
// part of the policy version: they change how a call is shown or whether a
// repeat waits for a human, not what an approved call does.

// Money declares one money argument of an operation (an entry of the
// operation's money array): an integer amount in the currency's minor unit
// (cents for USD, yen for JPY), and the argument that names its currency.
// The approval view shows the amount with its currency in major units as
// well ("999,999.99 USD (99,999,999 minor units)").
type Money struct {
	// Amount is the path of the amount argument (see Operation.Review for
	// paths). Its schema must be an integer.
	Amount string
	// Currency is the path of the argument holding the ISO 4217 code of
	// the amount's currency, a string; "" when the arguments do not say
	// (the view then shows minor units only).
	Currency string
}

// DuplicateAction says what the duplicate-intent guard does with a call
// that repeats a recent one (see Operation.DuplicateWindow).
type DuplicateAction string

// Duplicate actions.
const (
	// DuplicateHold records the repeat as awaiting_approval with the
	// earlier execution named as what it may duplicate: a human decides
	// whether it runs. It is the default.
	DuplicateHold DuplicateAction = "hold"
	// DuplicateAnswer answers the repeat with the earlier call's outcome
	// once that succeeded (recorded as a succeeded execution of its own,
	// whose outcome is the earlier one's); a repeat of a call still in
	// flight is held as with DuplicateHold. Only for operations whose
	// author declares that the same arguments twice in the window are
	// never meant as two effects.
	DuplicateAnswer DuplicateAction = "answer"
)

// Bounds of the review keys.
const (
	maxReviewFields = 32
	maxMoneyFields  = 8
	// A window shorter than a second guards nothing a runtime's retry
	// does; one longer than a day holds calls a user meant to repeat.
	minDuplicateWindow, maxDuplicateWindow = time.Second, 24 * time.Hour
)

// schemaAt resolves a review path ("amount", "shipping.address.city")
// through the properties of nested object schemas, following $ref. It
// returns nil when the schema declares no such property.
func schemaAt(root *jsonschema.Schema, path string) *jsonschema.Schema {
	s := root
	for _, name := range strings.Split(path, ".") {
		s = derefSchema(s)
		if s == nil {
			return nil
		}
		s = s.Properties[name]
	}
	return derefSchema(s)
}

func derefSchema(s *jsonschema.Schema) *jsonschema.Schema {
	for i := 0; s != nil && s.Ref != nil && i < 8; i++ {
		s = s.Ref
	}
	return s
}

// schemaTypes returns the types s declares, directly or in every branch of
// an anyOf or oneOf ("" for none).
func schemaTypes(s *jsonschema.Schema) []string {
	if s == nil {
		return nil
	}
	if s.Types != nil && !s.Types.IsEmpty() {
		return s.Types.ToStrings()
	}
	var out []string
	for _, list := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf} {
		for _, sub := range list {
			for _, t := range schemaTypes(derefSchema(sub)) {
				if !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// validPath reports whether path is dotted property names, none empty.
func validPath(path string) bool {
	if path == "" {
		return false
	}
	for _, name := range strings.Split(path, ".") {
		if name == "" || strings.ContainsAny(name, "[]\"") {
			return false
		}
	}
	return true
}

// reviewKeys parses review, money, duplicate_window, on_duplicate and
// intent of
// the operation op whose schema sch compiled (nil: it did not, and the
// paths are not checked against it).
func (p *parser) reviewKeys(op *Operation, sch *jsonschema.Schema, get func(string) field) {
	checkPath := func(f field, label, path string, want ...string) bool {
		switch {
		case !validPath(path):
			p.add(f.line, label, "%q is not an argument path (property names joined by \".\", e.g. \"amount\" or \"shipping.city\")", path)
			return false
		case sch == nil:
			return true
		}
		s := schemaAt(sch, path)
		if s == nil {
			p.add(f.line, label, "%q: the input schema declares no such property", path)
			return false
		}
		if len(want) > 0 {
			types := schemaTypes(s)
			other := slices.ContainsFunc(types, func(t string) bool { return t != "null" && !slices.Contains(want, t) })
			if other || !slices.ContainsFunc(types, func(t string) bool { return slices.Contains(want, t) }) {
				p.add(f.line, label, "%q must be of type %s in the input schema (it is %s)", path, strings.Join(want, " or "), orNone(types))
				return false
			}
		}
		return true
	}

	if f := get("review"); f.set {
		paths := p.strings(f)
		if len(paths) > maxReviewFields {
			p.add(f.line, f.label, "%d fields: name at most %d, the ones a reviewer decides on", len(paths), maxReviewFields)
		}
		seen := map[string]bool{}
		for i, path := range paths {
			label := fmt.Sprintf("%s[%d]", f.label, i)
			if seen[path] {
				p.add(f.line, label, "%q listed twice", path)
				continue
			}
			seen[path] = true
			if checkPath(f, label, path) {
				op.Review = append(op.Review, path)
			}
		}
	}

	if f := get("money"); f.set {
		arr, ok := f.v.([]map[string]any)
		if !ok {
			if anys, isArr := f.v.([]any); isArr {
				arr, ok = make([]map[string]any, 0, len(anys)), true
				for _, e := range anys {
					t, isTable := e.(map[string]any)
					if !isTable {
						ok = false
						break
					}
					arr = append(arr, t)
				}
			}
		}
		if !ok {
			p.add(f.line, f.label, `want an array of tables such as [{ amount = "amount", currency = "currency" }], got %s`, tomlType(f.v))
			arr = nil
		}
		if len(arr) > maxMoneyFields {
			p.add(f.line, f.label, "%d entries: at most %d", len(arr), maxMoneyFields)
		}
		seen := map[string]bool{}
		for i, t := range arr {
			label := fmt.Sprintf("%s[%d]", f.label, i)
			var mf Money
			good := true
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if k != "amount" && k != "currency" {
					p.add(f.line, label+"."+k, `unknown key (want "amount" and optionally "currency")`)
					good = false
				}
			}
			switch a, ok := t["amount"].(string); {
			case !ok:
				p.add(f.line, label+".amount", "missing: name the integer argument that holds the amount in minor units")
				good = false
			case seen[a]:
				p.add(f.line, label+".amount", "%q listed twice", a)
				good = false
			default:
				seen[a] = true
				mf.Amount = a
				good = checkPath(f, label+".amount", a, "integer") && good
			}
			if v, set := t["currency"]; set {
				c, ok := v.(string)
				if !ok {
					p.add(f.line, label+".currency", "want string, got %s", tomlType(v))
					good = false
				} else {
					mf.Currency = c
					good = checkPath(f, label+".currency", c, "string") && good
				}
			}
			if good {
				op.Money = append(op.Money, mf)
			}
		}
	}

	wf := get("duplicate_window")
	op.DuplicateWindow = p.duration(wf, minDuplicateWindow, maxDuplicateWindow, 0)
	if wf.set && op.Effect == EffectRead {
		p.add(wf.line, wf.label, "applies only to external operations: a read has no effect to repeat")
		op.DuplicateWindow = 0
	}
	af := get("on_duplicate")
	op.OnDuplicate = DuplicateHold
	if s, ok := p.str(af, false); ok && af.set {
		switch a := DuplicateAction(s); {
		case a != DuplicateHold && a != DuplicateAnswer:
			p.add(af.line, af.label, "%q: want %q or %q", s, DuplicateHold, DuplicateAnswer)
		case !wf.set:
			p.add(af.line, af.label, "applies only with duplicate_window (the window in which a call with the same arguments counts as a repeat)")
		default:
			op.OnDuplicate = a
		}
	}
	if f := get("intent"); f.set {
		p.intent(op, f, wf.set, checkPath)
	}
	if op.DuplicateWindow == 0 {
		op.OnDuplicate = ""
		op.Intent = nil
	}
}

// intent parses the intent table of op: argument paths (dotted keys, or
// nested tables, name nested arguments) and the kind each is compared by.
func (p *parser) intent(op *Operation, f field, window bool, checkPath func(f field, label, path string, want ...string) bool) {
	raw, ok := f.v.(map[string]any)
	if !ok {
		p.add(f.line, f.label, `want a table of argument = kind such as { amount = "text", currency = "case" }, got %s`, tomlType(f.v))
		return
	}
	if !window {
		p.add(f.line, f.label, "applies only with duplicate_window (the window in which a call of the same intent counts as a repeat)")
	}
	var fields []IntentField
	var flatten func(prefix string, t map[string]any)
	flatten = func(prefix string, t map[string]any) {
		keys := slices.Sorted(maps.Keys(t))
		for _, k := range keys {
			path := prefix + k
			label := f.label + "." + path
			switch v := t[k].(type) {
			case map[string]any:
				flatten(path+".", v)
			case string:
				kind := IntentKind(v)
				var want []string
				switch kind {
				case IntentText:
				case IntentCase:
					want = []string{"string"}
				case IntentEmail:
					want = []string{"string", "array"}
				default:
					p.add(f.line, label, "%q: want %q, %q or %q", v, IntentText, IntentCase, IntentEmail)
					continue
				}
				if checkPath(f, label, path, want...) {
					fields = append(fields, IntentField{Path: path, Kind: kind})
				}
			default:
				p.add(f.line, label, "want a kind (%q, %q or %q), got %s", IntentText, IntentCase, IntentEmail, tomlType(v))
			}
		}
	}
	flatten("", raw)
	switch {
	case len(raw) == 0:
		p.add(f.line, f.label, "names no argument: list the arguments that make two calls one effect, or leave intent out to compare every argument")
	case len(fields) > maxIntentFields:
		p.add(f.line, f.label, "%d arguments: name at most %d", len(fields), maxIntentFields)
	default:
		slices.SortFunc(fields, func(a, b IntentField) int { return strings.Compare(a.Path, b.Path) })
		op.Intent = fields
	}
}

func orNone(types []string) string {
	if len(types) == 0 {
		return "untyped"
	}
	return strings.Join(types, " or ")
}
