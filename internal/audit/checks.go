package audit

import (
	"bufio"
	"bytes"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/connhost/connhost/manifests"
)

// Checks that read more than one field: what an operation's words say it
// does, what the manifest text holds, and how deep its schema is closed.

// sideEffectVerbs are words that say an operation changes something. They
// are matched against the first word of an operation's name and of its
// description: names and descriptions conventionally start with the verb
// ("send_receipt", "Creates a refund"), and a later word is as likely a
// noun ("get_order", "Look up a charge").
var sideEffectVerbs = []string{
	"create", "send", "delete", "remove", "refund", "pay", "transfer", "publish", "cancel",
	"update", "write", "submit", "purchase", "deploy", "drop", "insert", "notify", "destroy",
	"modify", "upload", "execute", "trigger", "deliver", "revoke", "approve", "release", "charge",
}

// nameOnlyVerbs are matched as the first word of operation names only: at
// the head of a name they are verbs ("post_message", "set_status"), at the
// head of a description they may be nouns ("Order details for …").
var nameOnlyVerbs = []string{"post", "order", "book", "set", "put", "add", "edit", "start", "stop", "kill"}

// effectWord is the word that gave a read away, and where it was.
type effectWord struct{ where, word string }

// effectVerb returns the side-effect verb that starts op's name or its
// description, or the zero value.
func effectVerb(op *manifests.Operation) effectWord {
	if tok, _, _ := strings.Cut(op.Name, "_"); verbForm(tok, sideEffectVerbs) || verbForm(tok, nameOnlyVerbs) {
		return effectWord{"name", tok}
	}
	first := strings.TrimFunc(firstWord(op.Description), func(r rune) bool { return !unicode.IsLetter(r) })
	if verbForm(first, sideEffectVerbs) {
		return effectWord{"description", first}
	}
	return effectWord{}
}

// verbForm reports whether w is one of verbs, in its base, third-person or
// -ing form.
func verbForm(w string, verbs []string) bool {
	w = strings.ToLower(w)
	for _, v := range verbs {
		stem := strings.TrimSuffix(v, "e")
		if w == v || w == v+"s" || w == v+"es" || w == stem+"ing" || w == v+"ing" {
			return true
		}
	}
	return false
}

func firstWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// credentialPatterns are credentials recognisable by their shape. A
// manifest is reviewed, committed and shown to models: none belongs there.
var credentialPatterns = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`\b[sr]k_live_[0-9A-Za-z]{8,}`), "a Stripe live secret key (sk_live_…)"},
	{regexp.MustCompile(`\b[sr]k_test_[0-9A-Za-z]{8,}`), "a Stripe test secret key (sk_test_…)"},
	{regexp.MustCompile(`\bwhsec_[0-9A-Za-z]{16,}`), "a Stripe webhook signing secret (whsec_…)"},
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`), "a PEM private key"},
	{regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`), "an AWS access key id"},
	{regexp.MustCompile(`\bgh[pousr]_[0-9A-Za-z]{30,}`), "a GitHub token"},
	{regexp.MustCompile(`\bgithub_pat_[0-9A-Za-z_]{30,}`), "a GitHub token"},
	{regexp.MustCompile(`\bxox[abposr]-[0-9A-Za-z-]{10,}`), "a Slack token"},
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), "a Google API key"},
	{regexp.MustCompile(`\bglpat-[0-9A-Za-z_-]{20,}`), "a GitLab token"},
}

// tokenRE finds candidate tokens for the entropy check: long runs of the
// characters of base64, base64url and hex.
var tokenRE = regexp.MustCompile(`[A-Za-z0-9+/=_-]{32,}`)

var hexRE = regexp.MustCompile(`^[0-9a-fA-F]+$`)

// MinSecretEntropy is the Shannon entropy (bits per character) above which
// a token of 32 or more characters raises secret-like-token. Random
// base64 has about 6; English-like identifiers stay below 4.
const MinSecretEntropy = 4.2

// secrets scans the whole manifest text, comments included: a key pasted
// into a comment is published as surely as one in a value.
func (a *auditor) secrets() {
	text := a.m.Text()
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), len(text)+1)
	shaLine := a.m.Line("connector.sha256")
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		hit := false
		for _, p := range credentialPatterns {
			if loc := p.re.FindStringIndex(line); loc != nil {
				a.add(CodeSecretInManifest, at{line: n, col: loc[0] + 1},
					"the manifest holds %s: revoke it, remove it from the file and its history, and give secrets through connhost.toml (<key>_env)", p.what)
				hit = true
			}
		}
		if hit || n == shaLine {
			continue
		}
		for _, loc := range tokenRE.FindAllStringIndex(line, -1) {
			tok := line[loc[0]:loc[1]]
			if hexRE.MatchString(tok) || !hasLetterAndDigit(tok) || entropy(tok) < MinSecretEntropy {
				continue
			}
			a.add(CodeSecretLikeToken, at{line: n, col: loc[0] + 1},
				"a %d-character high-entropy token (%s…) may be a credential: if it is, revoke it and give it through connhost.toml; if not, waive this finding",
				len(tok), tok[:4])
		}
	}
}

func hasLetterAndDigit(s string) bool {
	return strings.ContainsFunc(s, unicode.IsLetter) && strings.ContainsFunc(s, unicode.IsDigit)
}

// entropy is the Shannon entropy of s in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// amountWords name money fields: a property whose name has one of these
// words (snake_case or camelCase) is an amount.
var amountWords = []string{"amount", "price", "cost", "fee", "total", "subtotal", "balance", "charge", "tax", "tip", "cents", "payout"}

// schema checks the whole input schema, nested objects and $defs
// included: an object that accepts undeclared properties (or any object),
// and a money amount without both bounds. Each finding is placed at the
// schema keyword it is about.
func (a *auditor) schema(op *manifests.Operation) {
	root := op.Schema()
	if root == nil {
		return
	}
	top := derefSchema(root)
	seen := map[*jsonschema.Schema]bool{}
	var visit func(s *jsonschema.Schema, name string)
	visit = func(s *jsonschema.Schema, name string) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		ptr := pointerOf(s)
		if s != root && s != top && isObjectSchema(s) {
			if why := looseObject(s, false); why != "" {
				pos := op.SchemaPos(ptr)
				a.add(CodePermissiveSchema, at{op: op, line: pos.Line, col: pos.Col}, "input schema object at %s %s", ptr, why)
			}
		}
		if isAmount(name) && isNumeric(s) {
			var missing []string
			if s.Minimum == nil && s.ExclusiveMinimum == nil {
				missing = append(missing, "minimum")
			}
			if s.Maximum == nil && s.ExclusiveMaximum == nil {
				missing = append(missing, "maximum")
			}
			if len(missing) > 0 {
				pos := op.SchemaPos(ptr)
				a.add(CodeUnboundedAmount, at{op: op, line: pos.Line, col: pos.Col},
					"%s is a money amount without a %s: the model may ask for any sum; bound it (minimum and maximum)", ptr, strings.Join(missing, " or "))
			}
		}
		keys := make([]string, 0, len(s.Properties))
		for k := range s.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			visit(s.Properties[k], k)
		}
		for _, sub := range s.PatternProperties {
			visit(sub, "")
		}
		if sub, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			visit(sub, "")
		}
		if sub, ok := s.Items.(*jsonschema.Schema); ok {
			visit(sub, name)
		}
		if subs, ok := s.Items.([]*jsonschema.Schema); ok {
			for _, sub := range subs {
				visit(sub, name)
			}
		}
		visit(s.Items2020, name)
		for _, sub := range s.PrefixItems {
			visit(sub, name)
		}
		for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
			for _, sub := range list {
				visit(sub, name)
			}
		}
		for _, sub := range []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else, s.Contains} {
			visit(sub, name)
		}
	}
	if why := looseObject(top, true); why != "" {
		pos := op.SchemaPos(pointerOf(top))
		a.add(CodePermissiveSchema, at{op: op, line: pos.Line, col: pos.Col}, "input schema %s", why)
	}
	visit(root, "")
}

// pointerOf returns the JSON pointer of s inside its schema document.
func pointerOf(s *jsonschema.Schema) string {
	_, frag, _ := strings.Cut(s.Location, "#")
	return frag
}

func derefSchema(s *jsonschema.Schema) *jsonschema.Schema {
	for i := 0; s != nil && s.Ref != nil && i < 8; i++ {
		s = s.Ref
	}
	return s
}

func isObjectSchema(s *jsonschema.Schema) bool {
	if s.Types != nil && !s.Types.IsEmpty() {
		return slices.Contains(s.Types.ToStrings(), "object")
	}
	return len(s.Properties) > 0
}

func isNumeric(s *jsonschema.Schema) bool {
	if s.Types == nil || s.Types.IsEmpty() {
		return s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil
	}
	t := s.Types.ToStrings()
	return slices.Contains(t, "integer") || slices.Contains(t, "number")
}

// isAmount reports whether a property name has a money word in it.
func isAmount(name string) bool {
	for _, w := range nameWords(name) {
		if slices.Contains(amountWords, w) {
			return true
		}
	}
	return false
}

// nameWords splits snake_case, kebab-case and camelCase into lower-case
// words.
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == ' ':
			flush()
		case unicode.IsUpper(r) && len(cur) > 0 && !unicode.IsUpper(cur[len(cur)-1]):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return words
}

// looseObject says how an object schema lets arguments through unchecked,
// or "" if it does not: no declared properties and undeclared ones
// allowed (any object), or undeclared properties allowed beside declared
// ones. An object that declares none and allows none accepts only {}. At the top level only "additionalProperties": false (or
// "unevaluatedProperties": false) closes it; a nested object may also be
// a typed map ("additionalProperties": {schema}).
func looseObject(s *jsonschema.Schema, top bool) string {
	if s == nil {
		return ""
	}
	closed := s.AdditionalProperties == false
	if u := s.UnevaluatedProperties; u != nil && u.Bool != nil && !*u.Bool {
		closed = true
	}
	if len(s.Properties) == 0 && len(s.PatternProperties) == 0 {
		if _, typedMap := s.AdditionalProperties.(*jsonschema.Schema); typedMap && !top {
			return ""
		}
		if closed {
			// No property declared and none other allowed: it accepts
			// exactly {} (an operation without arguments).
			return ""
		}
		return "declares no properties: it accepts any object"
	}
	if _, typedMap := s.AdditionalProperties.(*jsonschema.Schema); typedMap && !top {
		closed = true
	}
	if !closed {
		return `accepts properties it does not declare: set "additionalProperties": false`
	}
	return ""
}

// permissive says how a top-level object schema lets arguments through
// unchecked, or "" if it does not (see looseObject).
func permissive(s *jsonschema.Schema) string { return looseObject(derefSchema(s), true) }

// reviewed reports whether a reviewer may have to approve calls of op: it
// requires approval, or its duplicate-intent guard holds repeats for one.
func reviewed(op *manifests.Operation) bool {
	return op.RequiresApproval || op.DuplicateWindow > 0 && op.OnDuplicate == manifests.DuplicateHold
}

// unboundedStrings warns, for an operation a reviewer approves, on every
// string argument of its schema (nested ones included) without a
// maxLength, enum or const: a model can make such a call longer than any
// approval dialog shows, and the host then asks nobody in the client's
// dialog. Each finding is placed at the string's schema.
func (a *auditor) unboundedStrings(op *manifests.Operation) {
	root := op.Schema()
	if root == nil || !reviewed(op) {
		return
	}
	seen := map[*jsonschema.Schema]bool{}
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		if s.Types != nil && slices.Contains(s.Types.ToStrings(), "string") && s.MaxLength == nil && s.Enum == nil && s.Const == nil {
			ptr := pointerOf(s)
			pos := op.SchemaPos(ptr)
			a.add(CodeUnboundedString, at{op: op, line: pos.Line, col: pos.Col},
				"%s is a string without a maxLength, in an operation a reviewer approves: a model can make a call longer than an approval dialog shows whole (connhost then asks nobody in the MCP client's dialog); bound it with maxLength",
				ptr)
		}
		keys := make([]string, 0, len(s.Properties))
		for k := range s.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			visit(s.Properties[k])
		}
		for _, sub := range s.PatternProperties {
			visit(sub)
		}
		if sub, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			visit(sub)
		}
		if sub, ok := s.Items.(*jsonschema.Schema); ok {
			visit(sub)
		}
		if subs, ok := s.Items.([]*jsonschema.Schema); ok {
			for _, sub := range subs {
				visit(sub)
			}
		}
		visit(s.Items2020)
		for _, sub := range s.PrefixItems {
			visit(sub)
		}
		for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
			for _, sub := range list {
				visit(sub)
			}
		}
		for _, sub := range []*jsonschema.Schema{s.Ref, s.Then, s.Else} {
			visit(sub)
		}
	}
	visit(root)
}
