// Package provider is a tiny webhook receiver service, the provider the
// webhook connector talks to in tests: it stores deliveries, deduplicates
// them by Idempotency-Key and lets a delivery be looked up by its key.
//
//	POST /v1/deliveries                    {"topic", "payload"}; Idempotency-Key
//	GET  /v1/deliveries?idempotency_key=K  {"data": [delivery...]} (without K: every delivery)
//	GET  /v1/deliveries/{id}               delivery
//
// Idempotency: a POST whose key was seen with the same body gets the first
// answer again and stores nothing (header Idempotent-Replayed: true); with
// another body it is refused (422); while the first request with that key
// is still being processed, 409. Keys are kept as long as the server runs.
// A delivery may carry an event_id in its body instead: one whose
// event_id was stored before gets that delivery back the same way,
// whatever its headers say.
//
// connhost crashtest observes it through that API alone, as
// manifests/webhook.probe.toml describes. It also implements crashtest's
// probe contract under /_crashtest (see the package documentation of
// github.com/connhost/connhost/host/crashtest), the other way to answer
// the matrix: effect count, receipt look-up, sample arguments, and
// holding a request the way a provider still processing it does (inside
// the provider, its key claimed), reporting on release what it answered.
package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Delivery is one stored delivery.
type Delivery struct {
	ID      string          `json:"id"`
	Topic   string          `json:"topic"`
	Payload json.RawMessage `json:"payload"`
	Key     string          `json:"idempotency_key,omitempty"`
	EventID string          `json:"event_id,omitempty"`
}

// Server is the receiver. It is safe for concurrent use.
type Server struct {
	mu         sync.Mutex
	deliveries []Delivery
	byKey      map[string]keyed
	inFlight   map[string]bool
	hold       bool          // hold the next POST
	held       int           // requests held now
	release    chan struct{} // closed by /_crashtest/release
	answered   chan int      // the status the held request was answered, once applied
}

type keyed struct {
	body   []byte
	answer []byte
}

// New returns an empty receiver.
func New() *Server {
	return &Server{byKey: map[string]keyed{}, inFlight: map[string]bool{}, release: make(chan struct{})}
}

// Deliveries returns the stored deliveries.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/deliveries":
		s.create(w, r)
	case r.Method == "GET" && r.URL.Path == "/v1/deliveries":
		key := r.URL.Query().Get("idempotency_key")
		s.mu.Lock()
		list := []Delivery{}
		for _, d := range s.deliveries {
			if key == "" || d.Key == key {
				list = append(list, d)
			}
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"data": list})
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/deliveries/"):
		if d, ok := s.find(strings.TrimPrefix(r.URL.Path, "/v1/deliveries/")); ok {
			writeJSON(w, http.StatusOK, d)
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such delivery"})
	case strings.HasPrefix(r.URL.Path, "/_crashtest/"):
		s.probe(w, r, strings.TrimPrefix(r.URL.Path, "/_crashtest/"))
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	}
}

func (s *Server) find(id string) (Delivery, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.deliveries {
		if d.ID == id {
			return d, true
		}
	}
	return Delivery{}, false
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	var d Delivery
	if err := json.Unmarshal(body, &d); err != nil || d.Topic == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"topic\", \"payload\"}"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	if k, ok := s.byKey[key]; ok && key != "" {
		s.mu.Unlock()
		if !bytes.Equal(k.body, body) {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "idempotency key reused with other parameters"})
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(k.answer)
		return
	}
	if d.EventID != "" {
		for _, e := range s.deliveries {
			if e.EventID == d.EventID {
				s.mu.Unlock()
				w.Header().Set("Idempotent-Replayed", "true")
				writeJSON(w, http.StatusOK, e)
				return
			}
		}
	}
	if key != "" && s.inFlight[key] {
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, map[string]string{"error": "a request with this key is still being processed"})
		return
	}
	if key != "" {
		s.inFlight[key] = true
	}
	hold := s.hold
	if hold {
		s.hold = false
		s.held++
	}
	release, answered := s.release, s.answered
	s.mu.Unlock()

	if hold {
		// Received, not yet applied: wait for the release, whether or not
		// the client is still there, then apply it.
		<-release
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
	}

	s.mu.Lock()
	d.ID = fmt.Sprintf("dlv_%d", len(s.deliveries)+1)
	d.Key = key
	s.deliveries = append(s.deliveries, d)
	answer, _ := json.Marshal(d)
	if key != "" {
		s.byKey[key] = keyed{body: body, answer: answer}
		delete(s.inFlight, key)
	}
	s.mu.Unlock()
	if hold {
		answered <- http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// probe serves connhost crashtest's probe contract.
func (s *Server) probe(w http.ResponseWriter, r *http.Request, what string) {
	switch {
	case r.Method == "GET" && what == "effects":
		s.mu.Lock()
		n := len(s.deliveries)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]int{"effects": n})
	case r.Method == "GET" && strings.HasPrefix(what, "receipts/"):
		_, ok := s.find(strings.TrimPrefix(what, "receipts/"))
		writeJSON(w, http.StatusOK, map[string]bool{"exists": ok})
	case r.Method == "GET" && what == "args/deliver":
		writeJSON(w, http.StatusOK, map[string]any{"topic": "order.paid", "payload": map[string]any{"order": "o_1", "total": 500}})
	case r.Method == "GET" && what == "args/get_delivery":
		// A read names a delivery that exists: store one, once.
		s.mu.Lock()
		if len(s.deliveries) == 0 || s.deliveries[0].Topic != "seed" {
			seed := Delivery{ID: "dlv_seed", Topic: "seed", Payload: json.RawMessage(`{}`)}
			s.deliveries = append([]Delivery{seed}, s.deliveries...)
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"id": "dlv_seed"})
	case r.Method == "POST" && what == "hold":
		var in struct {
			Operation string `json:"operation"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Operation != "deliver" {
			writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "only deliver's request can be held"})
			return
		}
		s.mu.Lock()
		s.hold = true
		s.release = make(chan struct{})
		s.answered = make(chan int, 1)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == "GET" && what == "held":
		s.mu.Lock()
		n := s.held
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]int{"held": n})
	case r.Method == "POST" && what == "release":
		// Let the held request go on, and answer once it was answered,
		// with what it was answered: the matrix judges the effects then.
		s.mu.Lock()
		held := !s.hold && s.held > 0
		s.hold = false
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		answered := s.answered
		s.mu.Unlock()
		answers := []int{}
		if held {
			select {
			case st := <-answered:
				answers = append(answers, st)
			case <-time.After(10 * time.Second):
			}
		}
		writeJSON(w, http.StatusOK, map[string][]int{"answers": answers})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not part of the probe contract"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
