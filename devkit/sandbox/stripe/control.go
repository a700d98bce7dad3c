package stripe

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
)

// registerControl mounts the Stripe-specific part of the control API
// (the fault part is mounted by fault.Injector.Register):
//
//	GET  /_sandbox/stats       Stats
//	GET  /_sandbox/traces      the requests that carried a traceparent ([]Traced)
//	POST /_sandbox/search_lag  {"lag": "30s"}
//	POST /_sandbox/clock       {"advance": "1m"} → {"now": RFC 3339}
//	POST /_sandbox/reset       forget every object, key and counter
func (s *Server) registerControl(mux *http.ServeMux) {
	mux.HandleFunc("GET "+fault.ControlPrefix+"stats", func(w http.ResponseWriter, _ *http.Request) {
		fault.WriteJSON(w, http.StatusOK, s.Stats())
	})
	mux.HandleFunc("GET "+fault.ControlPrefix+"traces", func(w http.ResponseWriter, _ *http.Request) {
		fault.WriteJSON(w, http.StatusOK, s.Traces())
	})
	mux.HandleFunc("POST "+fault.ControlPrefix+"search_lag", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Lag fault.Duration `json:"lag"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Lag < 0 {
			fault.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"lag\": \"30s\"} with a non-negative duration"})
			return
		}
		s.SetSearchLag(time.Duration(body.Lag))
		fault.WriteJSON(w, http.StatusOK, body)
	})
	mux.HandleFunc("POST "+fault.ControlPrefix+"clock", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Advance fault.Duration `json:"advance"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Advance < 0 {
			fault.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"advance\": \"1m\"} with a non-negative duration"})
			return
		}
		s.Advance(time.Duration(body.Advance))
		fault.WriteJSON(w, http.StatusOK, map[string]string{"now": s.Now().UTC().Format(time.RFC3339Nano)})
	})
	mux.HandleFunc("POST "+fault.ControlPrefix+"reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		fault.WriteJSON(w, http.StatusOK, s.Stats())
	})
}
