package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// What the duplicate-intent guard compares (operation key intent): the
// arguments that make a call the same effect at the provider, each with
// how its spellings are compared. Two calls whose intents compare equal
// are one intent, however else their arguments differ: the guard holds
// the second as a possible duplicate. Like review and money, intent is no
// part of the policy version.

// IntentKind is how the guard compares one argument of an intent. Every
// kind compares text in Unicode normalisation form C (a precomposed "é"
// and "e" with a combining accent are one), numbers by value (5.0 and 5
// are one), and an empty value ("", [], {}, null) as an absent one, at
// every depth of the argument.
type IntentKind string

// Intent kinds.
const (
	// IntentText compares as every kind does, and no more.
	IntentText IntentKind = "text"
	// IntentCase also ignores letter case (Unicode case folding): a
	// currency code ("USD", "Usd", "usd").
	IntentCase IntentKind = "case"
	// IntentEmail compares e-mail addresses: the domain (after the last
	// "@") in any case, the local part as written; one address and a
	// list of that one address are the same, and a list is a set (order
	// and repeats ignored).
	IntentEmail IntentKind = "email"
)

// IntentField is one argument of an operation's intent (an entry of the
// operation's intent table).
type IntentField struct {
	// Path names the argument as review paths do ("amount",
	// "shipping.city").
	Path string
	// Kind is how its spellings are compared.
	Kind IntentKind
}

// String is the field as audit shows it: its path, and how it is
// compared when that is more than IntentText.
func (f IntentField) String() string {
	switch f.Kind {
	case IntentCase:
		return f.Path + " (any case)"
	case IntentEmail:
		return f.Path + " (e-mail: domain in any case, a set of addresses)"
	}
	return f.Path
}

// maxIntentFields bounds the intent table.
const maxIntentFields = 32

// intentDomain prefixes the text an intent digest is taken of, so that
// no other digest of the same arguments can stand for it.
const intentDomain = "connhost/intent-fields/v1\n"

// IntentDigest returns the hex sha256 of doc's intent (doc as ValidateDoc
// takes it): the arguments of op.Intent, each normalised by its kind,
// absent ones left out; without an intent table, every argument, each as
// IntentText. Two calls the guard must take for one intent have one
// digest; the ledger indexes guarded calls by it (ledger.Record's
// IntentDigest).
func (op *Operation) IntentDigest(doc map[string]any) string {
	intent := map[string]any{}
	if len(op.Intent) == 0 {
		for k, v := range doc {
			if n, ok := normalizeIntent(v, IntentText); ok {
				intent[k] = n
			}
		}
	} else {
		for _, f := range op.Intent {
			if v, ok := argAt(doc, f.Path); ok {
				if n, ok := normalizeIntent(v, f.Kind); ok {
					intent[f.Path] = n
				}
			}
		}
	}
	// encoding/json sorts map keys; every value is a map, slice,
	// string, bool or json.Number of a valid spelling.
	b, err := json.Marshal(intent)
	if err != nil {
		// Not reachable for what normalizeIntent returns; a digest of
		// nothing would make unrelated calls one intent, so fall back to
		// one no other call shares.
		b = []byte(fmt.Sprintf("%p", doc))
	}
	sum := sha256.Sum256(append([]byte(intentDomain), b...))
	return hex.EncodeToString(sum[:])
}

// argAt returns the argument path names in doc.
func argAt(doc map[string]any, path string) (any, bool) {
	var v any = doc
	for _, name := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// normalizeIntent returns v as kind compares it, or false when it counts
// as absent (empty).
func normalizeIntent(v any, kind IntentKind) (any, bool) {
	switch v := v.(type) {
	case nil:
		return nil, false
	case string:
		s := norm.NFC.String(v)
		if s == "" {
			return nil, false
		}
		switch kind {
		case IntentCase:
			s = norm.NFC.String(cases.Fold().String(s)) // a Caser is not for concurrent use
		case IntentEmail:
			if at := strings.LastIndexByte(s, '@'); at >= 0 {
				s = s[:at+1] + norm.NFC.String(cases.Fold().String(s[at+1:]))
			}
			return []any{s}, true
		}
		return s, true
	case json.Number:
		return canonicalNumber(v), true
	case bool:
		return v, true
	case []any:
		var out []any
		for _, e := range v {
			if n, ok := normalizeIntent(e, kind); ok {
				if kind == IntentEmail {
					if list, isList := n.([]any); isList {
						out = append(out, list...)
						continue
					}
				}
				out = append(out, n)
			}
		}
		if len(out) == 0 {
			return nil, false
		}
		if kind == IntentEmail {
			// A set of addresses: order and repeats do not change
			// whom the message reaches.
			slices.SortFunc(out, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			out = slices.CompactFunc(out, func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) })
		}
		return out, true
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if n, ok := normalizeIntent(e, kind); ok {
				out[norm.NFC.String(k)] = n
			}
		}
		if len(out) == 0 {
			return nil, false
		}
		return out, true
	}
	return v, true
}

// canonicalNumber returns n as its value's one spelling: plain digits for
// an integer, else the shortest exact decimal. A spelling too long to
// compute with cheaply (see maxExactSpelling) is kept as written.
func canonicalNumber(n json.Number) json.Number {
	s := string(n)
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	if len(s) > maxExactSpelling || len(exp) > 3 {
		return n
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return n
	}
	if r.IsInt() {
		return json.Number(r.Num().String())
	}
	// A decimal spelling's value has at most this many digits after the
	// point.
	_, frac, _ := strings.Cut(mant, ".")
	prec := len(frac) + 3*maxExactSpelling
	out := strings.TrimRight(r.FloatString(prec), "0")
	return json.Number(strings.TrimSuffix(out, "."))
}
