package stripe

import (
	"fmt"
	"strconv"
	"strings"
)

// The subset of Stripe's search query language
// (https://docs.stripe.com/search#search-query-language) the emulator
// understands for PaymentIntents:
//
//	clause   = ["-"] field op value
//	field    = "amount" | "created" | "currency" | "customer" | "status"
//	         | "metadata[" quoted-key "]"
//	op       = ":" | ">" | "<" | ">=" | "<="   (comparisons: amount, created)
//	value    = 'single' | "double" quoted string, or a bare token / number
//	query    = clause { ("AND" | "OR") clause }   (at most 10 clauses,
//	                                               AND and OR not mixed)
//
// String matches are exact and case-sensitive.

type clause struct {
	neg   bool
	field string
	key   string // metadata key
	op    string
	value string
}

type searchQuery struct {
	clauses []clause
	or      bool
}

func parseSearch(q string) (*searchQuery, error) {
	p := &qparser{s: q}
	out := &searchQuery{}
	conj := ""
	for {
		p.space()
		if p.eof() {
			if len(out.clauses) == 0 {
				return nil, fmt.Errorf("empty query")
			}
			out.or = conj == "OR"
			return out, nil
		}
		if len(out.clauses) > 0 {
			word := p.word()
			switch word {
			case "AND", "OR":
			default:
				return nil, fmt.Errorf("expected AND or OR at position %d, found %q", p.i, word)
			}
			if conj != "" && conj != word {
				return nil, fmt.Errorf("AND and OR can not be combined in one query")
			}
			conj = word
			p.space()
		}
		c, err := p.clause()
		if err != nil {
			return nil, err
		}
		out.clauses = append(out.clauses, c)
		if len(out.clauses) > 10 {
			return nil, fmt.Errorf("a query can have at most 10 clauses")
		}
	}
}

type qparser struct {
	s string
	i int
}

func (p *qparser) eof() bool { return p.i >= len(p.s) }

func (p *qparser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *qparser) word() string {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ' ' {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *qparser) clause() (clause, error) {
	var c clause
	if !p.eof() && p.s[p.i] == '-' {
		c.neg = true
		p.i++
	}
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] == '_' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z') {
		p.i++
	}
	c.field = p.s[start:p.i]
	if c.field == "" {
		return c, fmt.Errorf("expected a field name at position %d", start)
	}
	if c.field == "metadata" {
		if p.eof() || p.s[p.i] != '[' {
			return c, fmt.Errorf("metadata must be followed by ['key']")
		}
		p.i++
		key, err := p.quoted()
		if err != nil {
			return c, fmt.Errorf("metadata key: %w", err)
		}
		if p.eof() || p.s[p.i] != ']' {
			return c, fmt.Errorf("missing ] after metadata key")
		}
		p.i++
		c.key = key
	}
	switch {
	case strings.HasPrefix(p.s[p.i:], ">="), strings.HasPrefix(p.s[p.i:], "<="):
		c.op = p.s[p.i : p.i+2]
		p.i += 2
	case !p.eof() && strings.IndexByte(":<>", p.s[p.i]) >= 0:
		c.op = p.s[p.i : p.i+1]
		p.i++
	default:
		return c, fmt.Errorf("expected :, >, <, >= or <= after %s", c.field)
	}
	if p.eof() {
		return c, fmt.Errorf("missing value for %s", c.field)
	}
	if p.s[p.i] == '\'' || p.s[p.i] == '"' {
		v, err := p.quoted()
		if err != nil {
			return c, err
		}
		c.value = v
	} else {
		c.value = p.word()
		if c.value == "" {
			return c, fmt.Errorf("missing value for %s", c.field)
		}
	}
	switch c.field {
	case "amount", "created":
		if _, err := strconv.ParseInt(c.value, 10, 64); err != nil {
			return c, fmt.Errorf("%s needs a number, got %q", c.field, c.value)
		}
	case "currency", "customer", "status", "metadata":
		if c.op != ":" {
			return c, fmt.Errorf("%s only supports the : operator", c.field)
		}
	default:
		return c, fmt.Errorf("field `%s` is an unsupported search field for resource `payment_intents`", c.field)
	}
	return c, nil
}

func (p *qparser) quoted() (string, error) {
	if p.eof() || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("expected a quoted string at position %d", p.i)
	}
	q := p.s[p.i]
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		ch := p.s[p.i]
		switch {
		case ch == '\\' && p.i+1 < len(p.s):
			b.WriteByte(p.s[p.i+1])
			p.i += 2
		case ch == q:
			p.i++
			return b.String(), nil
		default:
			b.WriteByte(ch)
			p.i++
		}
	}
	return "", fmt.Errorf("unterminated string")
}

func (q *searchQuery) match(pi *PaymentIntent) bool {
	for _, c := range q.clauses {
		m := c.match(pi)
		if q.or && m {
			return true
		}
		if !q.or && !m {
			return false
		}
	}
	return !q.or
}

func (c clause) match(pi *PaymentIntent) bool {
	var m bool
	switch c.field {
	case "amount", "created":
		v := pi.Amount
		if c.field == "created" {
			v = pi.Created
		}
		n, _ := strconv.ParseInt(c.value, 10, 64)
		switch c.op {
		case ":":
			m = v == n
		case ">":
			m = v > n
		case "<":
			m = v < n
		case ">=":
			m = v >= n
		case "<=":
			m = v <= n
		}
	case "currency":
		m = pi.Currency == strings.ToLower(c.value)
	case "customer":
		m = pi.Customer != nil && *pi.Customer == c.value
	case "status":
		m = pi.Status == c.value
	case "metadata":
		v, ok := pi.Metadata[c.key]
		m = ok && v == c.value
	}
	return m != c.neg
}
