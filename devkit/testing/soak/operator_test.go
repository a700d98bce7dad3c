//go:build unix

package soak

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// operator resolves every recovery_required execution from the providers'
// evidence, as the person on call would: the effect tagged with the
// execution exists → applied (its id is the receipt); it does not →
// not applied, dispatch again with the same key; a release (manual): its
// relayed copy exists → applied, else → abandoned.
func (s *soak) operator(ctx context.Context, api string, rr []httpapi.Execution, byExec map[string]*call) map[string]int {
	out := map[string]int{}
	if len(rr) == 0 {
		return out
	}
	ev, err := s.evidence(ctx)
	if err != nil {
		s.fatalf("read the providers: %v", err)
	}
	for _, r := range rr {
		c := byExec[r.ExecutionID]
		if c == nil {
			s.errorf("recovery_required execution %s was never issued by the test", r.ExecutionID)
			continue
		}
		c.rrSeen = true
		req := httpapi.ResolveRequest{By: "soak-operator"}
		applied := false
		var receipt string
		var ids []string
		switch c.tool {
		case opCreate:
			ids = ev.pis[r.ExecutionID]
		case opRefund:
			ids = ev.refunds[r.ExecutionID]
		case opSend:
			ids = ev.msgs[messageID(r.IdempotencyKey)]
		case opRelease:
			ids = ev.copies[releaseTo(c.toolCallID)]
		}
		switch {
		case c.tool == opRelease && len(ids) == 0:
			req.Reason = "no relayed copy of the message at the provider: nothing was released"
		case len(ids) == 1:
			applied, receipt = true, ids[0]
			req.Receipt, req.Result = receipt, json.RawMessage(fmt.Sprintf(`{"id":%q}`, receipt))
			req.Reason = "found the effect tagged with the execution at the provider"
		case len(ids) == 0:
			req.Retry = true
			req.Reason = "no effect tagged with the execution at the provider"
		default:
			s.errorf("recovery_required %s has %d effects at the provider: %v", c, len(ids), ids)
			continue
		}
		req.Applied = &applied
		decision := "abandon"
		switch {
		case applied:
			decision = "applied"
		case req.Retry:
			decision = "retry"
		}
		res, p, err := s.api.resolve(ctx, api, r.ExecutionID, req)
		if err != nil || p != nil {
			s.errorf("resolve %s (%s): %v %+v", c, decision, err, p)
			continue
		}
		out[decision]++
		s.observe(c, res)
		if res.Status == host.StatusPending {
			s.drive(ctx, c, false)
		}
	}
	return out
}
