package httpapi

import (
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// Execution is the one JSON shape of an execution, everywhere: a
// host.Result, with the audit trail on the reads that show it. It is the
// answer of POST /v1/executions and of the decision routes, each item of
// GET /v1/executions, GET /v1/executions/{id} (with its events), and the
// --json output of connhost exec, ls and history. A runtime needs one
// parser: status is what it branches on, state the ledger state behind
// it.
type Execution struct {
	host.Result
	// Events is the audit trail: GET /v1/executions/{id} and history only.
	Events []ledger.Event `json:"events,omitempty"`
}

// NewExecution returns the view of a record and its audit trail, as
// GET /v1/executions/{id} and history show it.
func NewExecution(rec ledger.Record, evs []ledger.Event) Execution {
	if evs == nil {
		evs = []ledger.Event{}
	}
	return Execution{Result: host.ResultOf(rec), Events: evs}
}
