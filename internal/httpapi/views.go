package httpapi

import (
	"encoding/json"

	"github.com/connhost/connhost/ledger"
)

// RecordView is a ledger.Record as the API (and `connhost history --json`)
// shows it: the arguments and the result are inlined as JSON instead of the
// base64 that encoding/json gives a []byte.
type RecordView struct {
	ledger.Record
	// Args shadows Record.Args.
	Args json.RawMessage `json:"args"`
	// Outcome shadows Record.Outcome.
	Outcome *OutcomeView `json:"outcome,omitempty"`
}

// OutcomeView is a ledger.Outcome with its result inlined as JSON.
type OutcomeView struct {
	ledger.Outcome
	// Result shadows Outcome.Result.
	Result json.RawMessage `json:"result,omitempty"`
}

// ExecutionView is the answer of GET /v1/executions/{id}.
type ExecutionView struct {
	Record RecordView     `json:"record"`
	Events []ledger.Event `json:"events"`
}

// NewRecordView returns the view of rec.
func NewRecordView(rec ledger.Record) RecordView {
	v := RecordView{Record: rec, Args: rawJSON(rec.Args)}
	if rec.Outcome != nil {
		v.Outcome = &OutcomeView{Outcome: *rec.Outcome, Result: rawJSON(rec.Outcome.Result)}
	}
	return v
}

// NewExecutionView returns the view of a record and its audit trail.
func NewExecutionView(rec ledger.Record, evs []ledger.Event) ExecutionView {
	if evs == nil {
		evs = []ledger.Event{}
	}
	return ExecutionView{Record: NewRecordView(rec), Events: evs}
}

// rawJSON returns b as inline JSON when it is valid JSON, as a JSON string
// otherwise (the ledger stores the exact bytes it was given), and nil when
// b is empty.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}
