package fault

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Register mounts the fault part of the control API on mux:
//
//	GET    /_sandbox/faults   the active rules (remaining uses in "count")
//	POST   /_sandbox/faults   add one Rule or an array of Rules (JSON)
//	DELETE /_sandbox/faults   clear every rule
//	POST   /_sandbox/release  release every held request
//	GET    /_sandbox/held     {"held": n}
func (in *Injector) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+ControlPrefix+"faults", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, in.Rules())
	})
	mux.HandleFunc("POST "+ControlPrefix+"faults", func(w http.ResponseWriter, r *http.Request) {
		rules, err := decodeRules(r.Body)
		if err != nil {
			WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		for _, rule := range rules {
			if err := rule.Validate(); err != nil {
				WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
		}
		for _, rule := range rules {
			_ = in.Add(rule)
		}
		WriteJSON(w, http.StatusOK, in.Rules())
	})
	mux.HandleFunc("DELETE "+ControlPrefix+"faults", func(w http.ResponseWriter, _ *http.Request) {
		in.Clear()
		WriteJSON(w, http.StatusOK, []Rule{})
	})
	mux.HandleFunc("POST "+ControlPrefix+"release", func(w http.ResponseWriter, _ *http.Request) {
		in.Release()
		WriteJSON(w, http.StatusOK, map[string]int{"held": in.Held()})
	})
	mux.HandleFunc("GET "+ControlPrefix+"held", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]int{"held": in.Held()})
	})
}

func decodeRules(r io.Reader) ([]Rule, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fault: reading rules: %w", err)
	}
	s := strings.TrimSpace(string(b))
	dec := func(v any) error {
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}
	if strings.HasPrefix(s, "[") {
		var rules []Rule
		if err := dec(&rules); err != nil {
			return nil, fmt.Errorf("fault: decoding rules: %w", err)
		}
		return rules, nil
	}
	var rule Rule
	if err := dec(&rule); err != nil {
		return nil, fmt.Errorf("fault: decoding rule: %w", err)
	}
	return []Rule{rule}, nil
}

// WriteJSON writes v as an indented JSON answer with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
