package httpapi

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/connhost/connhost/internal/strictjson"
)

// checkBody refuses a request body that encoding/json would read in a way
// the client may not have meant, before it is decoded into v (a pointer to
// a request struct): invalid UTF-8 and unpaired UTF-16 surrogate escapes,
// which decode to U+FFFD so that "call_\xff" and "call_\xfe" would name one
// tool call; a key named twice anywhere in the body, of which decoding
// keeps the last; and a top-level key that differs from a field's name
// only by case, which decoding would match case-insensitively. Unknown
// keys are left to the decoder's DisallowUnknownFields. The message names
// the key and where it is.
func checkBody(body []byte, v any) error {
	doc, err := strictjson.Parse(body)
	if err != nil {
		return err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil // the decoder reports a body that is not an object
	}
	names := fieldNames(reflect.TypeOf(v))
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if names[k] {
			continue
		}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			if strings.EqualFold(n, k) {
				return fmt.Errorf("unknown field %q (field names are case-sensitive: %q)", k, n)
			}
		}
	}
	return nil
}

var fieldNamesCache sync.Map // reflect.Type → map[string]bool

// fieldNames returns the JSON names of the fields of the struct t points
// to.
func fieldNames(t reflect.Type) map[string]bool {
	if m, ok := fieldNamesCache.Load(t); ok {
		return m.(map[string]bool)
	}
	names := map[string]bool{}
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		for f := range t.Elem().Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch name {
			case "-":
				continue
			case "":
				name = f.Name
			}
			names[name] = true
		}
	}
	fieldNamesCache.Store(t, names)
	return names
}
