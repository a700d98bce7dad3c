package mailpit

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// stateVersion is the format of the file Persist writes.
const stateVersion = 1

// savedState is what Persist writes: every stored message, the tag names
// in their first-seen casing, and the counters. Fault rules are
// configuration, not state.
type savedState struct {
	Version  int               `json:"version"`
	Messages []savedMessage    `json:"messages"`
	TagNames map[string]string `json:"tag_names"`
	Stats    Stats             `json:"stats"`
}

type savedMessage struct {
	Message    Message   `json:"message"`
	Read       bool      `json:"read"`
	Created    time.Time `json:"created"`
	Snippet    string    `json:"snippet"`
	SearchText string    `json:"search_text"`
}

// Persist loads the state saved at path, when the file exists, and from
// then on saves the server's state there after every send and delete,
// before the request is answered (a message's read flag is saved with the
// next change). It must be called before the server serves. A file that
// cannot be used is an error wrapping statefile.ErrCorrupt; it is never
// silently replaced.
func (s *Server) Persist(path string) error {
	return s.state.Persist(path, func(st savedState) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.restoreLocked(st)
	})
}

// save writes the state to the Persist path, if any.
func (s *Server) save() error {
	return s.state.Save(func() savedState {
		s.mu.Lock()
		defer s.mu.Unlock()
		st := savedState{Version: stateVersion, Stats: s.stats, TagNames: make(map[string]string, len(s.tagNames)),
			Messages: make([]savedMessage, 0, len(s.messages))}
		st.Stats.FaultsInjected = 0
		for k, v := range s.tagNames {
			st.TagNames[k] = v
		}
		for _, m := range s.messages {
			st.Messages = append(st.Messages, savedMessage{Message: m.Message, Read: m.read, Created: m.created, Snippet: m.snippet, SearchText: m.searchText})
		}
		return st
	}, s.opts.Logger)
}

// saved saves the state after a change and reports whether that worked;
// if not, it answers 500 (the change would not survive a restart).
func (s *Server) saved(w http.ResponseWriter) bool {
	if err := s.save(); err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, "sandbox: the emulator's state could not be saved: %v\n", err)
		return false
	}
	return true
}

// restoreLocked replaces the state by st after checking that it holds
// together; it reports every problem at once.
func (s *Server) restoreLocked(st savedState) error {
	if st.Version != stateVersion {
		return fmt.Errorf("version %d, this emulator reads version %d", st.Version, stateVersion)
	}
	var errs []error
	msgs := make([]*message, 0, len(st.Messages))
	byID := make(map[string]*message, len(st.Messages))
	for i, sm := range st.Messages {
		switch id := sm.Message.ID; {
		case id == "" || sm.Message.MessageID == "":
			errs = append(errs, fmt.Errorf("messages[%d]: ID and MessageID are required", i))
			continue
		case byID[id] != nil:
			errs = append(errs, fmt.Errorf("messages[%d]: ID %s appears twice", i, id))
			continue
		}
		m := &message{Message: sm.Message, read: sm.Read, created: sm.Created, snippet: sm.Snippet, searchText: sm.SearchText}
		msgs = append(msgs, m)
		byID[m.ID] = m
	}
	tags := make(map[string]string, len(st.TagNames))
	for lc, name := range st.TagNames {
		if lc != strings.ToLower(name) {
			errs = append(errs, fmt.Errorf("tag_names: %q is not the lower-case form of %q", lc, name))
		}
		tags[lc] = name
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s.messages, s.byID, s.tagNames, s.stats = msgs, byID, tags, st.Stats
	return nil
}
