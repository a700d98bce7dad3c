package manifests

import (
	"errors"
	"fmt"
	"strings"
)

// Errors callers branch on with errors.Is. Every error this package returns
// wraps one of them.
var (
	// ErrInvalid: a manifest is malformed TOML or breaks a rule. The error
	// is a *ValidationError listing every problem with its file and line.
	ErrInvalid = errors.New("manifests: invalid manifest")
	// ErrSyntax: the manifest is not well-formed TOML. It is always wrapped
	// together with ErrInvalid; errors.As also finds the toml.ParseError.
	ErrSyntax = errors.New("manifests: toml syntax error")
	// ErrInvalidArgs: arguments do not satisfy an operation's input schema.
	// The error is an *ArgsError listing every failing path.
	ErrInvalidArgs = errors.New("manifests: invalid arguments")
	// ErrDuplicateConnector: two manifests loaded by LoadDir declare the
	// same connector name.
	ErrDuplicateConnector = errors.New("manifests: duplicate connector")
	// ErrBadDigest: a digest handed to SetSHA256 or PinFile is not 64
	// lower-case hex characters.
	ErrBadDigest = errors.New("manifests: bad sha256 digest")
	// ErrNoConnectorTable: SetSHA256 found no [connector] table to pin.
	ErrNoConnectorTable = errors.New("manifests: no [connector] table")
	// ErrNoOperation: SetOperationField found no [[operation]] of that
	// name.
	ErrNoOperation = errors.New("manifests: no such operation")
	// ErrNotEditable: SetOperationField cannot make the edit line by line
	// (a multi-line value, operations written as an inline array), or was
	// asked for a key or value TOML cannot write on one line.
	ErrNotEditable = errors.New("manifests: cannot edit in place")
)

// Problem is one rule a manifest breaks.
type Problem struct {
	// Line is the 1-based line the problem is reported at (the key's line,
	// else its table's line); 0 when no line applies, e.g. a missing table.
	Line int `json:"line"`
	// Column is the 1-based byte column, when the problem has a precise
	// one: TOML syntax errors, and problems inside an input schema (the
	// column of the offending JSON key or value). 0 otherwise.
	Column int `json:"column,omitempty"`
	// Field names the offending value, e.g. "connector.sha256",
	// "capabilities.http[1]" or "operation[create_payment].recovery".
	// Operations without a usable name are "operation[#2]" (1-based).
	// Empty for syntax errors.
	Field string `json:"field,omitempty"`
	// Msg says what is wrong, in lower case.
	Msg string `json:"msg"`
}

// String formats p as "line: field: msg" (or "line:column: …") without
// the file name.
func (p Problem) String() string {
	var b strings.Builder
	if p.Column > 0 {
		fmt.Fprintf(&b, "%d:%d: ", p.Line, p.Column)
	} else {
		fmt.Fprintf(&b, "%d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// ValidationError reports every problem found in one manifest file. It
// wraps ErrInvalid (and ErrSyntax plus the toml.ParseError when the file is
// not well-formed TOML).
type ValidationError struct {
	// File is the manifest's path or the name given to Parse.
	File string
	// Problems are sorted by line; there is at least one.
	Problems []Problem

	syntax error // the toml.ParseError, for syntax errors
}

// Error prints one problem per line as "file:line: field: msg".
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File)
		b.WriteByte(':')
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap returns ErrInvalid, and for syntax errors ErrSyntax and the
// underlying toml.ParseError.
func (e *ValidationError) Unwrap() []error {
	if e.syntax != nil {
		return []error{ErrInvalid, ErrSyntax, e.syntax}
	}
	return []error{ErrInvalid}
}

// ArgProblem is one failing location in an operation's arguments.
type ArgProblem struct {
	// Path is the JSON pointer of the failing value ("" is the whole
	// argument object).
	Path string `json:"path"`
	// Msg says what the schema expected there.
	Msg string `json:"msg"`
}

// ArgsError reports arguments that do not satisfy an operation's input
// schema. It wraps ErrInvalidArgs.
type ArgsError struct {
	// Operation is the operation's name.
	Operation string
	// Problems lists every failing path, sorted by path.
	Problems []ArgProblem
}

// Error lists the failing paths: "manifests: invalid arguments for
// create_payment: /amount: ...; /currency: ...".
func (e *ArgsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s for %s: ", ErrInvalidArgs.Error(), e.Operation)
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		path := p.Path
		if path == "" {
			path = "/"
		}
		b.WriteString(path)
		b.WriteString(": ")
		b.WriteString(p.Msg)
	}
	return b.String()
}

// Unwrap returns ErrInvalidArgs.
func (e *ArgsError) Unwrap() error { return ErrInvalidArgs }
