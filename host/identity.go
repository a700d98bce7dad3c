package host

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIdentityBytes is the longest namespace, session_id or tool_call_id a
// call may carry, in bytes. Runtimes' ids (call_…, toolu_…, UUIDs) are far
// shorter; the cap keeps identities printable in one line of ls, history
// and the logs.
const MaxIdentityBytes = 256

// validateIdentity refuses identity fields that two callers could read as
// the same id, or that would not survive being printed: a field must be
// valid UTF-8 (decoders replace every invalid byte by U+FFFD, so
// "call_\xff" and "call_\xfe" would become one tool call on the way
// through JSON), hold no control character (Unicode category Cc: C0
// including NUL, DEL, C1), and be at most MaxIdentityBytes long. The error
// wraps ErrBadCall and names the field, the problem and its byte offset;
// nothing is recorded for a refused call. Empty fields are Execute's to
// report.
func validateIdentity(call ToolCall) error {
	for _, f := range [...]struct{ name, v string }{
		{"namespace", call.Namespace},
		{"session_id", call.SessionID},
		{"tool_call_id", call.ToolCallID},
	} {
		if msg := identityProblem(f.v); msg != "" {
			return refuse(ErrBadCall, "%s %s", f.name, msg)
		}
	}
	return nil
}

// identityProblem says what is wrong with one identity field, or "".
func identityProblem(s string) string {
	if len(s) > MaxIdentityBytes {
		return fmt.Sprintf("is %d bytes long; at most %d are allowed", len(s), MaxIdentityBytes)
	}
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !validRuneAt(s, i):
			return fmt.Sprintf("is not valid UTF-8 (byte %#02x at offset %d)", s[i], i)
		case unicode.IsControl(r):
			return fmt.Sprintf("holds the control character %U at offset %d", r, i)
		}
	}
	return ""
}

// validRuneAt reports whether s holds a real U+FFFD at i, not an invalid
// byte that range decoded as one.
func validRuneAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size > 1
}
