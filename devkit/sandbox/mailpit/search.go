package mailpit

import (
	"strings"
)

// argsParser splits a search into words like Mailpit's tools.ArgsParser:
// double quotes group words and are removed.
func argsParser(s string) []string {
	var args []string
	var sb strings.Builder
	quoted := false
	flush := func() {
		v := strings.TrimSpace(strings.ReplaceAll(sb.String(), `"`, ""))
		if v != "" {
			args = append(args, v)
		}
		sb.Reset()
	}
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			sb.WriteRune(r)
		case !quoted && r == ' ':
			flush()
		default:
			sb.WriteRune(r)
		}
	}
	if sb.Len() > 0 {
		flush()
	}
	return args
}

// likeFold reports whether needle (already lower-case) is a substring of
// hay, ignoring ASCII case like SQLite's LIKE.
func likeFold(hay, needle string) bool {
	return strings.Contains(asciiLower(hay), needle)
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func addrsText(as ...[]*Address) string {
	var b strings.Builder
	for _, list := range as {
		for _, a := range list {
			b.WriteString(a.Name)
			b.WriteByte(' ')
			b.WriteString(a.Address)
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// compileSearch turns a Mailpit search into a predicate. Supported terms
// (each may be negated with a leading - or !): to:, from:, cc:, bcc:,
// reply-to:, addressed:, subject:, message-id:, tag:, is:read, is:unread,
// is:tagged, has:attachment; any other word matches the search text. All
// terms must match. Dates and sizes are not emulated.
func compileSearch(q string) func(*message) bool {
	var preds []func(*message) bool
	for _, w := range argsParser(q) {
		if cleanString(w) == "" {
			continue
		}
		lw := strings.ToLower(w)
		exclude := false
		if len(w) > 1 && (strings.HasPrefix(w, "-") || strings.HasPrefix(w, "!")) {
			exclude = true
			w, lw = w[1:], lw[1:]
		}
		if w == "" {
			continue
		}
		var p func(*message) bool
		prefixed := func(prefix string, field func(*message) string) bool {
			if !strings.HasPrefix(lw, prefix) {
				return false
			}
			term := cleanString(w[len(prefix):])
			if term != "" {
				p = func(m *message) bool { return likeFold(field(m), term) }
			}
			return true
		}
		switch {
		case prefixed("to:", func(m *message) string { return addrsText(m.To) }):
		case prefixed("from:", func(m *message) string { return addrsText([]*Address{m.From}) }):
		case prefixed("cc:", func(m *message) string { return addrsText(m.Cc) }):
		case prefixed("bcc:", func(m *message) string { return addrsText(m.Bcc) }):
		case prefixed("reply-to:", func(m *message) string { return addrsText(m.ReplyTo) }):
		case prefixed("addressed:", func(m *message) string {
			return addrsText(m.To, []*Address{m.From}, m.Cc, m.Bcc, m.ReplyTo)
		}):
		case strings.HasPrefix(lw, "subject:"):
			// Mailpit does not clean subject terms, only lower-cases via LIKE.
			term := asciiLower(w[len("subject:"):])
			if term != "" {
				p = func(m *message) bool { return likeFold(m.Subject, term) }
			}
		case prefixed("message-id:", func(m *message) string { return m.MessageID }):
		case strings.HasPrefix(lw, "tag:"):
			term := cleanString(w[len("tag:"):])
			if term != "" {
				p = func(m *message) bool {
					for _, t := range m.Tags {
						if strings.EqualFold(t, term) {
							return true
						}
					}
					return false
				}
			}
		case lw == "is:read":
			p = func(m *message) bool { return m.read }
		case lw == "is:unread":
			p = func(m *message) bool { return !m.read }
		case lw == "is:tagged":
			p = func(m *message) bool { return len(m.Tags) > 0 }
		case lw == "has:attachment" || lw == "has:attachments":
			p = func(m *message) bool { return len(m.Attachments) > 0 }
		case lw == "has:inline" || lw == "has:inlines":
			p = func(m *message) bool { return len(m.Inline) > 0 }
		default:
			term := cleanString(w)
			p = func(m *message) bool { return strings.Contains(m.searchText, term) }
		}
		if p == nil {
			continue
		}
		if exclude {
			inner := p
			p = func(m *message) bool { return !inner(m) }
		}
		preds = append(preds, p)
	}
	return func(m *message) bool {
		for _, p := range preds {
			if !p(m) {
				return false
			}
		}
		return true
	}
}
