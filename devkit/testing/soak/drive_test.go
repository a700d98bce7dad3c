//go:build unix

package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// drive issues c until it is terminal or recovery_required, as a runtime
// resuming it would: same ids, same arguments, approving it when it waits
// for approval and re-driving it after, re-issuing after every transport
// error (a kill). A session_fenced refusal marks c deferred when
// allowDefer, and is an error otherwise. It reports whether c reached a
// final status.
func (s *soak) drive(ctx context.Context, c *call, allowDefer bool) bool {
	for step := 0; ; step++ {
		if ctx.Err() != nil {
			return false
		}
		if step == maxSteps {
			s.errorf("call %s: no final status after %d requests (last %+v)", c, maxSteps, c.last)
			return false
		}
		api, gen := s.host.current()
		res, p, err := s.api.execute(ctx, api, c.request())
		switch {
		case isTransport(err):
			s.transport.Add(1)
			s.host.waitNewer(ctx, gen, 2*time.Second)
			continue
		case err != nil:
			if ctx.Err() == nil {
				s.errorf("call %s: %v", c, err)
			}
			return false
		case p != nil && p.Code == httpapi.CodeSessionFenced:
			s.refusals.Add(1)
			s.mu.Lock()
			s.fenced[c.session] = true
			s.mu.Unlock()
			if !allowDefer {
				s.errorf("call %s: session still fenced: %s", c, p.Detail)
				return false
			}
			c.deferred = true
			return false
		case p != nil && p.Code == httpapi.CodeUnavailable:
			s.host.waitNewer(ctx, gen, 2*time.Second)
			continue
		case p != nil:
			s.errorf("call %s refused: %s: %s", c, p.Code, p.Detail)
			return false
		}
		c.deferred = false
		s.observe(c, res)
		switch {
		case res.Status == host.StatusAwaitingApproval:
			if res.Approval == nil || res.Approval.ID == "" || res.Approval.ArgsDigest == "" {
				s.errorf("call %s: awaiting_approval without an approval: %+v", c, res)
				return false
			}
			_, p, err := s.api.approve(ctx, api, res.Approval.ID, res.Approval.ArgsDigest)
			switch {
			case isTransport(err):
				s.transport.Add(1)
				s.host.waitNewer(ctx, gen, 2*time.Second)
			case err != nil:
				if ctx.Err() == nil {
					s.errorf("approve %s: %v", c, err)
				}
				return false
			case p == nil:
				s.approvals.Add(1)
				c.approved = true
			case p.Code == httpapi.CodeNotAwaitingApproval:
				// Approved before a kill lost the answer.
				c.approved = true
			default:
				s.errorf("approve %s: %s: %s", c, p.Code, p.Detail)
				return false
			}
		case res.Status == host.StatusPending:
			// Approved or waiting for a scheduled retry: re-drive when due.
			d := 10 * time.Millisecond
			if !res.NextAttemptAt.IsZero() {
				d = min(max(time.Until(res.NextAttemptAt), d), 5*time.Second)
			}
			tm := time.NewTimer(d)
			select {
			case <-ctx.Done():
				tm.Stop()
				return false
			case <-tm.C:
			}
		case res.Status == host.StatusRecoveryRequired || terminal(res.Status):
			return true
		default:
			s.errorf("call %s: unexpected status %q", c, res.Status)
			return false
		}
	}
}

// observe records an answer for c: the execution id never changes, and a
// terminal answer, once given, is given again unchanged (no duplicate
// result).
func (s *soak) observe(c *call, res host.Result) {
	if res.ExecutionID == "" {
		s.errorf("call %s: answer without an execution id: %+v", c, res)
		return
	}
	if c.execID == "" {
		c.execID = res.ExecutionID
	} else if c.execID != res.ExecutionID {
		s.errorf("call %s: execution id changed to %s", c, res.ExecutionID)
	}
	c.last = res
	if a := res.Approval; a != nil {
		switch {
		case c.approvalExpiry.IsZero():
			c.approvalExpiry = a.ExpiresAt
		case !c.approvalExpiry.Equal(a.ExpiresAt):
			s.forgotten.Add(1)
			s.errorf("call %s: approval request recreated (expiry %s, was %s): the ledger lost the intent it had answered", c, a.ExpiresAt, c.approvalExpiry)
		}
	}
	if c.approved && res.Status == host.StatusAwaitingApproval {
		s.forgotten.Add(1)
		s.errorf("call %s: awaiting approval again after an answered approve: the ledger lost the approval", c)
	}
	if res.Status == host.StatusRecoveryRequired {
		c.rrSeen = true
	}
	if !terminal(res.Status) {
		if c.first != nil {
			s.dupResults.Add(1)
			s.errorf("call %s: was %s (receipt %q), now %s", c, c.first.Status, c.first.Receipt, res.Status)
		}
		return
	}
	if c.first == nil {
		r := res
		c.first = &r
		if res.Status == host.StatusSucceeded {
			s.mu.Lock()
			switch c.tool {
			case opCreate:
				s.payments = append(s.payments, res.Receipt)
			case opSend:
				s.messages = append(s.messages, res.Receipt)
			}
			s.mu.Unlock()
		}
		return
	}
	// The outcome must not change: status, receipt and result. Its source
	// may change from connector to reconciled: a lazily written outcome
	// lost at a kill (every kill loses unsynced writes here) is re-derived
	// by reconcile, and the answer says so.
	rederived := c.first.Source == "connector" && res.Source == "reconciled"
	if f := c.first; f.Status != res.Status || f.Receipt != res.Receipt || (f.Source != res.Source && !rederived) || !sameJSON(f.Result, res.Result) {
		s.dupResults.Add(1)
		s.errorf("call %s: a second, different result: first %s %q %s, now %s %q %s",
			c, f.Status, f.Receipt, f.Result, res.Status, res.Receipt, res.Result)
	}
}

// terminal reports whether a status is final and not recovery_required.
func terminal(st host.Status) bool {
	switch st {
	case host.StatusSucceeded, host.StatusFailed, host.StatusRejected, host.StatusExpired,
		host.StatusAbandoned, host.StatusCancelled:
		return true
	}
	return false
}

func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// reissueAll re-issues every call once more (several at a time).
func (s *soak) reissueAll(ctx context.Context) {
	ch := make(chan *call)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range ch {
				before := c.first
				if !s.drive(ctx, c, false) {
					s.errorf("re-issued call %s did not reach a final status (last %s)", c, c.last.Status)
				}
				if before == nil && c.first != nil && !c.rrSeen {
					s.errorf("re-issued call %s became %s only now: it was not final before", c, c.first.Status)
				}
			}
		})
	}
	for _, c := range s.calls {
		ch <- c
	}
	close(ch)
	wg.Wait()
}
