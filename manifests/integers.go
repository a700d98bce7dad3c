package manifests

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// An integer written as a fraction or with an exponent (500.0, 5e2,
// 1E3) is an integer to JSON Schema: "type": "integer" accepts it. It is
// not one to the connector that decodes the argument into an integer
// type, which fails on it after a reviewer approved the call as "5.00
// USD". And as another spelling of the same value, it would give the
// same call another digest. So where the schema asks for an integer,
// ValidateDoc refuses any spelling but the plain one (see RATIONALE.md,
// "Why refuse 500.0 where the schema says integer?").

// integerSpellings returns an *ArgsError naming each number of doc,
// which sch accepts, that is written with a fraction or an exponent and
// sits where sch asks for an integer; nil when there is none.
//
// Where the schema asks for an integer is what the schema's own
// validator says: every such number is replaced by its value plus one
// half, which no "integer" accepts and every "number" does, and the
// replaced document is validated again. A type error at a replaced number
// means some schema that applies there (through properties, items,
// $ref, allOf, or every branch of an anyOf or oneOf) wants an integer.
func (op *Operation) integerSpellings(sch *jsonschema.Schema, doc map[string]any) error {
	spelled := map[string]spelling{}
	bumped, changed := bumpIntegers(doc, "", spelled)
	if !changed {
		return nil
	}
	err := sch.Validate(bumped)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return nil
	}
	var probs []ArgProblem
	var visit func(e *jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		ptr := ""
		if len(e.InstanceLocation) > 0 {
			ptr = "/" + strings.Join(escapeAll(e.InstanceLocation), "/")
		}
		t, isType := e.ErrorKind.(*kind.Type)
		if n, marked := spelled[ptr]; isType && marked && slices.Contains(t.Want, "integer") {
			p := ArgProblem{Path: ptr, Msg: fmt.Sprintf(
				"%s is an integer written with a fraction or an exponent, which the connector does not read as one: send %s", n.text, n.plain)}
			if !slices.Contains(probs, p) {
				probs = append(probs, p)
			}
		}
		for _, c := range e.Causes {
			visit(c)
		}
	}
	visit(ve)
	if len(probs) == 0 {
		return nil
	}
	slices.SortStableFunc(probs, func(a, b ArgProblem) int { return strings.Compare(a.Path, b.Path) })
	return &ArgsError{Operation: op.Name, Problems: probs}
}

// bumpIntegers returns v with every number that is an integer written
// with a fraction or an exponent replaced by a number that is not an
// integer (its value plus one half), recording each at its JSON pointer
// (below ptr) in spelled. changed is false, and v returned as it is, when
// there is none.
func bumpIntegers(v any, ptr string, spelled map[string]spelling) (out any, changed bool) {
	switch v := v.(type) {
	case json.Number:
		bumped, plain, ok := bump(string(v))
		if !ok {
			return v, false
		}
		spelled[ptr] = spelling{text: string(v), plain: plain}
		return json.Number(bumped), true
	case map[string]any:
		var m map[string]any
		for k, e := range v {
			b, ch := bumpIntegers(e, ptr+"/"+escapePointer(k), spelled)
			if !ch {
				continue
			}
			if m == nil {
				m = maps.Clone(v)
			}
			m[k] = b
		}
		if m == nil {
			return v, false
		}
		return m, true
	case []any:
		var a []any
		for i, e := range v {
			b, ch := bumpIntegers(e, ptr+"/"+strconv.Itoa(i), spelled)
			if !ch {
				continue
			}
			if a == nil {
				a = slices.Clone(v)
			}
			a[i] = b
		}
		if a == nil {
			return v, false
		}
		return a, true
	}
	return v, false
}

// spelling is an integer written with a fraction or an exponent, and
// what to write instead.
type spelling struct{ text, plain string }

// maxExactSpelling bounds the numbers whose value bump computes exactly:
// beyond it (1e400, a thousand digits) arithmetic on the value costs
// time, while its spelling already tells whether it is an integer.
const maxExactSpelling = 64

// bump returns, for a JSON number s that is an integer written with a
// fraction or an exponent, a number that is not an integer (s plus one
// half) and s in plain digits; for a spelling longer than
// maxExactSpelling or with an exponent beyond it, one half and "it in
// plain digits". ok is false for every other number.
func bump(s string) (bumped, plain string, ok bool) {
	const rough, roughPlain = "0.5", "it in plain digits"
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, hasFrac := strings.Cut(mant, ".")
	if !hasExp && !hasFrac {
		return "", "", false // plain digits
	}
	digits := strings.TrimLeft(strings.TrimPrefix(intPart, "-")+frac, "0")
	e := 0
	if hasExp {
		n, err := strconv.Atoi(exp)
		if err != nil {
			// An exponent too long for an int: the number is 0 or too
			// small to be one, or enormous, an integer.
			if digits != "" && !strings.HasPrefix(exp, "-") {
				return rough, roughPlain, true
			}
			return "", "", false
		}
		e = n
	}
	// The value is digits × 10^(e − len(frac)); it is an integer when the
	// digits' trailing zeros make up for a negative power.
	zeros := len(digits) - len(strings.TrimRight(digits, "0"))
	if digits != "" && e-len(frac)+zeros < 0 {
		return "", "", false
	}
	if len(s) > maxExactSpelling || e > maxExactSpelling || e < -maxExactSpelling {
		return rough, roughPlain, true
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", "", false
	}
	return new(big.Rat).Add(r, big.NewRat(1, 2)).FloatString(1), r.Num().String(), true
}
