package httpapi

import (
	"encoding/json"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// Execution is the one JSON shape of an execution, everywhere: the answer
// of POST /v1/executions and of the decision routes (a host.Result as
// is), each item of GET /v1/executions, GET /v1/executions/{id} (with its
// events), and the --json output of connhost exec, ls and history. A
// runtime needs one parser: status is what it branches on, state the
// ledger state behind it.
//
// The fields after Events are deprecated aliases that keep clients of API
// 1.0 working, where an execution read from the ledger was a ledger
// record: GET /v1/executions/{id} answered {record, events} and the
// listing's items were records. They appear only on those reads and go
// away in API 2.
type Execution struct {
	host.Result
	// Events is the audit trail: GET /v1/executions/{id} and history only.
	Events []ledger.Event `json:"events,omitempty"`

	// ID is ExecutionID (list items only). Deprecated.
	ID string `json:"id,omitempty"`
	// Connector and Operation are Tool's parts (list items only).
	// Deprecated.
	Connector string `json:"connector,omitempty"`
	Operation string `json:"operation,omitempty"`
	// Outcome is the recorded outcome, now in result, receipt, error and
	// source (list items only). Deprecated.
	Outcome *OutcomeView `json:"outcome,omitempty"`
	// Record is the whole ledger record (GET /v1/executions/{id} and
	// history only). Deprecated.
	Record *RecordView `json:"record,omitempty"`
}

// NewListItem returns the view of rec as GET /v1/executions and ls list
// it.
func NewListItem(rec ledger.Record) Execution {
	v := Execution{Result: host.ResultOf(rec), ID: rec.ID, Connector: rec.Connector, Operation: rec.Operation}
	if rec.Outcome != nil {
		v.Outcome = newOutcomeView(*rec.Outcome)
	}
	return v
}

// NewExecution returns the view of a record and its audit trail, as
// GET /v1/executions/{id} and history show it.
func NewExecution(rec ledger.Record, evs []ledger.Event) Execution {
	if evs == nil {
		evs = []ledger.Event{}
	}
	rv := NewRecordView(rec)
	return Execution{Result: host.ResultOf(rec), Events: evs, Record: &rv}
}

// RecordView is a ledger.Record with its arguments and result inlined as
// JSON instead of the base64 that encoding/json gives a []byte: the
// deprecated record member of GET /v1/executions/{id}.
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

// NewRecordView returns the view of rec.
func NewRecordView(rec ledger.Record) RecordView {
	v := RecordView{Record: rec, Args: rawJSON(rec.Args)}
	if rec.Outcome != nil {
		v.Outcome = newOutcomeView(*rec.Outcome)
	}
	return v
}

func newOutcomeView(o ledger.Outcome) *OutcomeView {
	return &OutcomeView{Outcome: o, Result: rawJSON(o.Result)}
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
