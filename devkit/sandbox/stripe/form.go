package stripe

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// form is a request's parameters decoded from Stripe's bracket notation:
// scalars (amount=100), hashes (metadata[k]=v) and arrays
// (payment_method_types[]=card or payment_method_types[0]=card).
type form struct {
	raw    url.Values
	scalar map[string]string
	hash   map[string]map[string]string
	array  map[string][]string
}

// apiErr is an error answer together with its HTTP status.
type apiErr struct {
	status int
	err    *Error
}

func invalid(param, code, format string, args ...any) *apiErr {
	return &apiErr{status: 400, err: &Error{Type: typeInvalidRequest, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}}
}

func parseForm(raw url.Values) (*form, *apiErr) {
	f := &form{raw: raw, scalar: map[string]string{}, hash: map[string]map[string]string{}, array: map[string][]string{}}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vals := raw[k]
		i := strings.IndexByte(k, '[')
		if i < 0 {
			f.scalar[k] = vals[len(vals)-1]
			continue
		}
		if !strings.HasSuffix(k, "]") || i == 0 {
			return nil, invalid(k, "", "Invalid parameter name: %s", k)
		}
		name, sub := k[:i], k[i+1:len(k)-1]
		if strings.ContainsAny(sub, "[]") {
			return nil, invalid(k, "", "Nested parameters are not supported by the sandbox: %s", k)
		}
		switch {
		case sub == "":
			f.array[name] = append(f.array[name], vals...)
		case isIndex(sub):
			f.array[name] = append(f.array[name], vals[len(vals)-1])
		default:
			if f.hash[name] == nil {
				f.hash[name] = map[string]string{}
			}
			f.hash[name][sub] = vals[len(vals)-1]
		}
	}
	return f, nil
}

func isIndex(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// names returns every top-level parameter name.
func (f *form) names() []string {
	var out []string
	for k := range f.scalar {
		out = append(out, k)
	}
	for k := range f.hash {
		out = append(out, k)
	}
	for k := range f.array {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkKnown rejects parameters the endpoint does not accept, as Stripe does.
func (f *form) checkKnown(known ...string) *apiErr {
	for _, n := range f.names() {
		ok := false
		for _, k := range known {
			if n == k {
				ok = true
				break
			}
		}
		if !ok {
			return invalid(n, codeParameterUnknown, "Received unknown parameter: %s", n)
		}
	}
	return nil
}

func (f *form) has(name string) bool {
	_, ok := f.scalar[name]
	return ok
}

func (f *form) str(name string) string { return f.scalar[name] }

func (f *form) integer(name string, required bool) (int64, bool, *apiErr) {
	s, ok := f.scalar[name]
	if !ok {
		if required {
			return 0, false, invalid(name, codeParameterMissing, "Missing required param: %s.", name)
		}
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, invalid(name, codeParameterInvalid, "Invalid integer: %s", s)
	}
	return n, true, nil
}

func (f *form) boolean(name string) (bool, *apiErr) {
	s, ok := f.scalar[name]
	if !ok {
		return false, nil
	}
	switch s {
	case "true":
		return true, nil
	case "false", "":
		return false, nil
	}
	return false, invalid(name, "", "Invalid boolean: %s", s)
}

// metadata validates Stripe's metadata limits: 50 keys, keys up to 40
// characters without square brackets, values up to 500 characters.
func (f *form) metadata() (map[string]string, *apiErr) {
	md := map[string]string{}
	if s, ok := f.scalar["metadata"]; ok && s != "" {
		return nil, invalid("metadata", "", "Invalid hash")
	}
	for k, v := range f.hash["metadata"] {
		if len(k) > 40 {
			return nil, invalid("metadata", "", "Metadata keys can have up to 40 characters. The key %q has %d.", k, len(k))
		}
		if len(v) > 500 {
			return nil, invalid("metadata", "", "Metadata values can have up to 500 characters, but you passed in a value that is %d characters. Invalid value: %s", len(v), v)
		}
		if v == "" {
			continue // an empty value unsets the key
		}
		md[k] = v
	}
	if len(md) > 50 {
		return nil, invalid("metadata", "", "You can only specify up to 50 metadata keys.")
	}
	return md, nil
}

// fingerprint is the normalized request the idempotency layer compares:
// method, path and the parameters in a canonical order.
func fingerprint(method, path string, raw url.Values) string {
	return method + " " + path + "?" + raw.Encode()
}
