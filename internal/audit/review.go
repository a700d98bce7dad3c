package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/connhost/connhost/manifests"
)

// A reviewer's decisions live next to the manifest they are about, in two
// JSON files named after it (payments.toml: payments.waivers.json and
// payments.signoff.json), so that they travel with the manifest through
// review and deployment but never change its digest. Both name the
// manifest digest they were made for: a changed manifest is a new thing to
// review. A waiver also names the review digest (the manifest without its
// module pin), so that re-pinning a rebuilt module does not undo it.

// Errors of the review files. Callers branch on them with errors.Is.
var (
	// ErrNotSigned: the connector has no sign-off file.
	ErrNotSigned = errors.New("audit: connector not signed off")
	// ErrSignoffChanged: the manifest or module differs from what was
	// signed off. The error is a *SignoffError naming what changed.
	ErrSignoffChanged = errors.New("audit: connector changed since its sign-off")
	// ErrCannotSign: the audit does not pass, so nothing is signed.
	ErrCannotSign = errors.New("audit: cannot sign off")
	// ErrCannotWaive: the finding to waive is not in the report, or is an
	// error.
	ErrCannotWaive = errors.New("audit: cannot waive")
	// ErrReviewFile: a waiver or sign-off file does not parse.
	ErrReviewFile = errors.New("audit: bad review file")
)

// WaiversPath returns the waiver file of the manifest at manifestPath:
// the same name with ".waivers.json" in place of ".toml".
func WaiversPath(manifestPath string) string { return sidecar(manifestPath, ".waivers.json") }

// SignoffPath returns the sign-off file of the manifest at manifestPath:
// the same name with ".signoff.json" in place of ".toml".
func SignoffPath(manifestPath string) string { return sidecar(manifestPath, ".signoff.json") }

func sidecar(manifestPath, ext string) string {
	return strings.TrimSuffix(manifestPath, filepath.Ext(manifestPath)) + ext
}

// Waiver accepts the warning or info findings with one code (and
// operation) of one version of a manifest. The finding stays in the
// report, marked waived; it no longer fails the audit or a sign-off.
// Errors cannot be waived: each is a reason the host refuses the
// connector or a promise the module cannot keep.
type Waiver struct {
	Code Code `json:"code"`
	// Operation is the operation the finding is about ("" for a finding
	// about the connector as a whole).
	Operation string `json:"operation,omitempty"`
	// ManifestSHA256 is the digest of the manifest file the reviewer
	// looked at.
	ManifestSHA256 string `json:"manifest_sha256"`
	// ReviewedSHA256 is its review digest (manifests.Manifest.ReviewDigest:
	// the file without its module pin). The waiver applies to every
	// manifest with this review digest, however its module is pinned
	// (`connhost build --pin` keeps it), except a waiver of a finding
	// about the module itself (undeclared-operation, module-not-checked),
	// which applies to ManifestSHA256 alone. A waiver without it (written
	// before it existed) applies to ManifestSHA256 alone.
	ReviewedSHA256 string `json:"reviewed_sha256,omitempty"`
	// Reviewer is who accepted the finding.
	Reviewer string `json:"reviewer"`
	// Reason says why the finding is acceptable.
	Reason string `json:"reason"`
	// At is when the waiver was given.
	At time.Time `json:"at"`
}

func (w Waiver) String() string {
	s := string(w.Code)
	if w.Operation != "" {
		s += " on " + w.Operation
	}
	return fmt.Sprintf("%s waived by %s (%s)", s, w.Reviewer, w.Reason)
}

// WaiverFile is the content of a waiver file.
type WaiverFile struct {
	Connector string   `json:"connector"`
	Waivers   []Waiver `json:"waivers"`
}

// ReadWaivers reads a waiver file; a missing file is an empty one.
func ReadWaivers(path string) (WaiverFile, error) {
	var wf WaiverFile
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return wf, nil
	}
	if err != nil {
		return wf, fmt.Errorf("audit: read waivers: %w", err)
	}
	if err := decodeStrict(data, &wf); err != nil {
		return wf, fmt.Errorf("%w: %s: %w", ErrReviewFile, path, err)
	}
	return wf, nil
}

// WriteWaivers writes wf to path atomically.
func WriteWaivers(path string, wf WaiverFile) error { return writeFileJSON(path, wf) }

// Waive adds to wf a waiver of the findings with code (and operation) in
// the report of connector, by reviewer for reason. It refuses a code the
// report does not raise for that connector and operation
// (ErrCannotWaive), an error finding, and an empty reviewer or reason.
// Earlier waivers of the same code and operation are replaced: a waiver
// is given for the manifest as it is now.
func Waive(wf WaiverFile, r Report, connector string, code Code, operation, reviewer, reason string, now time.Time) (WaiverFile, error) {
	if strings.TrimSpace(reviewer) == "" || strings.TrimSpace(reason) == "" {
		return wf, fmt.Errorf("%w: a waiver needs a reviewer and a reason", ErrCannotWaive)
	}
	i := slices.IndexFunc(r.Connectors, func(c ConnectorReport) bool { return c.Name == connector })
	if i < 0 {
		return wf, fmt.Errorf("%w: connector %s is not in the report", ErrCannotWaive, connector)
	}
	found := false
	var ops []string // operations the code is raised for, for the hint
	for _, f := range r.Findings {
		if f.Connector == connector && f.Code == code && f.Operation != operation && f.Operation != "" && !slices.Contains(ops, f.Operation) {
			ops = append(ops, f.Operation)
		}
		if f.Connector != connector || f.Code != code || f.Operation != operation {
			continue
		}
		if f.Severity == SeverityError {
			return wf, fmt.Errorf("%w: %s is an error; errors cannot be waived, fix the manifest or the module", ErrCannotWaive, code)
		}
		found = true
	}
	if !found {
		where := connector
		if operation != "" {
			where += "/" + operation
		}
		if len(ops) > 0 {
			return wf, fmt.Errorf("%w: the audit raises no %s for %s, only for operation %s (waive %s:%s)",
				ErrCannotWaive, code, where, strings.Join(ops, ", "), code, ops[0])
		}
		return wf, fmt.Errorf("%w: the audit raises no %s for %s", ErrCannotWaive, code, where)
	}
	wf.Connector = connector
	wf.Waivers = slices.DeleteFunc(wf.Waivers, func(w Waiver) bool { return w.Code == code && w.Operation == operation })
	wf.Waivers = append(wf.Waivers, Waiver{
		Code: code, Operation: operation, ManifestSHA256: r.Connectors[i].ManifestSHA256, ReviewedSHA256: r.Connectors[i].ReviewSHA256,
		Reviewer: reviewer, Reason: reason, At: now.UTC().Truncate(time.Second),
	})
	return wf, nil
}

// Signoff records that a reviewer accepted a connector as it is: its
// manifest and module by digest, the policy version of every operation and
// the waivers in force. connhost serve with require_signoff refuses a
// connector whose manifest or module differs from its sign-off.
type Signoff struct {
	Connector string    `json:"connector"`
	Version   string    `json:"version"`
	Reviewer  string    `json:"reviewer"`
	SignedAt  time.Time `json:"signed_at"`
	// Manifest is the manifest's file name.
	Manifest       string `json:"manifest"`
	ManifestSHA256 string `json:"manifest_sha256"`
	// Module is the module's file name.
	Module       string `json:"module"`
	ModuleSHA256 string `json:"module_sha256"`
	// PolicyVersions maps each operation to its policy version.
	PolicyVersions map[string]string `json:"policy_versions"`
	// Waivers are the waivers the sign-off accepted.
	Waivers []Waiver `json:"waivers"`
}

// SignoffStatus is a connector's sign-off as the audit found it.
type SignoffStatus struct {
	// Status is "signed" (the sign-off matches), "changed" (the manifest
	// or module differs from what was signed), "unsigned" (no sign-off
	// file) or "invalid" (the file does not parse).
	Status   string `json:"status"`
	File     string `json:"file,omitempty"`
	Reviewer string `json:"reviewer,omitempty"`
	SignedAt string `json:"signed_at,omitempty"`
	// Changes names what differs from the sign-off.
	Changes []string `json:"changes,omitempty"`
}

// Sign-off statuses.
const (
	SignoffSigned   = "signed"
	SignoffChanged  = "changed"
	SignoffUnsigned = "unsigned"
	SignoffInvalid  = "invalid"
)

// SignoffError says why a connector's sign-off does not cover it. It
// wraps ErrNotSigned or ErrSignoffChanged.
type SignoffError struct {
	Connector string
	// File is the sign-off file looked at.
	File string
	// Changes names what changed since the sign-off (empty when there is
	// none).
	Changes []string
	err     error
}

func (e *SignoffError) Error() string {
	if errors.Is(e.err, ErrNotSigned) {
		return fmt.Sprintf("connector %s is not signed off (no %s): a reviewer runs connhost audit --sign --by NAME on its manifest", e.Connector, e.File)
	}
	return fmt.Sprintf("connector %s changed since its sign-off (%s): %s; a reviewer audits it and signs again",
		e.Connector, e.File, strings.Join(e.Changes, "; "))
}

// Unwrap returns ErrNotSigned or ErrSignoffChanged.
func (e *SignoffError) Unwrap() error { return e.err }

// ReadSignoff reads a sign-off file. A missing file is an error wrapping
// ErrNotSigned (and os.ErrNotExist).
func ReadSignoff(path string) (Signoff, error) {
	var s Signoff
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("%w: %w", ErrNotSigned, err)
	}
	if err != nil {
		return s, fmt.Errorf("audit: read sign-off: %w", err)
	}
	if err := decodeStrict(data, &s); err != nil {
		return s, fmt.Errorf("%w: %s: %w", ErrReviewFile, path, err)
	}
	return s, nil
}

// WriteSignoff writes s to path atomically.
func WriteSignoff(path string, s Signoff) error { return writeFileJSON(path, s) }

// Sign returns the sign-off of connector as audited in r, by reviewer at
// now. It refuses (ErrCannotSign) a connector the report does not hold,
// whose module was not checked or does not match its pin, or that has an
// error or a warning that is not waived: a sign-off says the reviewer
// accepts every finding.
func Sign(r Report, connector, reviewer string, now time.Time) (Signoff, error) {
	if strings.TrimSpace(reviewer) == "" {
		return Signoff{}, fmt.Errorf("%w: a sign-off needs a reviewer (--by)", ErrCannotSign)
	}
	i := slices.IndexFunc(r.Connectors, func(c ConnectorReport) bool { return c.Name == connector })
	if i < 0 {
		return Signoff{}, fmt.Errorf("%w: connector %s is not in the report", ErrCannotSign, connector)
	}
	c := r.Connectors[i]
	var open []string
	var waivers []Waiver
	for _, f := range r.Findings {
		// The manifest's findings and those of its review files.
		if f.Connector != connector || (f.File != c.File && f.File != WaiversPath(c.File) && f.File != SignoffPath(c.File)) {
			continue
		}
		switch {
		case f.Waived != nil:
			waivers = append(waivers, *f.Waived)
		case f.Severity == SeverityError || f.Severity == SeverityWarning:
			open = append(open, fmt.Sprintf("%s %s (%s)", f.Severity, f.Code, f.Where()))
		}
	}
	if len(open) > 0 {
		return Signoff{}, fmt.Errorf("%w: %s has %d finding(s) that are neither fixed nor waived: %s",
			ErrCannotSign, connector, len(open), strings.Join(open, "; "))
	}
	if !c.Module.Checked || c.Module.DigestStatus != DigestMatch {
		return Signoff{}, fmt.Errorf("%w: %s: the module must be found and match its pin (digest %s)", ErrCannotSign, connector, c.Module.DigestStatus)
	}
	s := Signoff{
		Connector: c.Name, Version: c.Version, Reviewer: reviewer, SignedAt: now.UTC().Truncate(time.Second),
		Manifest: filepath.Base(c.File), ManifestSHA256: c.ManifestSHA256,
		Module: c.Module.File, ModuleSHA256: c.Module.ActualSHA256,
		PolicyVersions: map[string]string{}, Waivers: uniqueWaivers(waivers),
	}
	for _, op := range c.Operations {
		s.PolicyVersions[op.Name] = op.PolicyVersion
	}
	return s, nil
}

func uniqueWaivers(ws []Waiver) []Waiver {
	out := []Waiver{}
	for _, w := range ws {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// Changes names what differs between the sign-off and the manifest m with
// a module of digest moduleSHA256 ("" when unknown: not compared): the
// manifest digest, the module digest, and per operation its policy
// version, or that it was added or removed. Nil means the sign-off covers
// them.
func (s Signoff) Changes(m *manifests.Manifest, moduleSHA256 string) []string {
	var out []string
	if s.Connector != m.Connector.Name {
		out = append(out, fmt.Sprintf("sign-off is for connector %q, the manifest declares %q", s.Connector, m.Connector.Name))
	}
	if s.ManifestSHA256 != m.Digest {
		out = append(out, fmt.Sprintf("manifest %s: sha256 %s signed, now %s", filepath.Base(m.Path), short(s.ManifestSHA256), short(m.Digest)))
	}
	if moduleSHA256 != "" && s.ModuleSHA256 != moduleSHA256 {
		out = append(out, fmt.Sprintf("module %s: sha256 %s signed, now %s", m.Connector.Module, short(s.ModuleSHA256), short(moduleSHA256)))
	}
	for _, op := range m.Operations {
		signed, ok := s.PolicyVersions[op.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("operation %s was added", op.Name))
		case signed != op.PolicyVersion():
			out = append(out, fmt.Sprintf("operation %s: policy version %s signed, now %s", op.Name, signed, op.PolicyVersion()))
		}
	}
	names := make([]string, 0, len(s.PolicyVersions))
	for name := range s.PolicyVersions {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, ok := m.Operation(name); !ok {
			out = append(out, fmt.Sprintf("operation %s was removed", name))
		}
	}
	return out
}

// CheckSignoff verifies that the sign-off next to m (SignoffPath) covers m
// and a module of digest moduleSHA256. It returns nil, a *SignoffError
// (wrapping ErrNotSigned or ErrSignoffChanged), or an error reading the
// file (ErrReviewFile).
func CheckSignoff(m *manifests.Manifest, moduleSHA256 string) error {
	path := SignoffPath(m.Path)
	s, err := ReadSignoff(path)
	if errors.Is(err, ErrNotSigned) {
		return &SignoffError{Connector: m.Connector.Name, File: path, err: ErrNotSigned}
	}
	if err != nil {
		return err
	}
	if ch := s.Changes(m, moduleSHA256); len(ch) > 0 {
		return &SignoffError{Connector: m.Connector.Name, File: path, Changes: ch, err: ErrSignoffChanged}
	}
	return nil
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12] + "…"
	}
	if digest == "" {
		return "(none)"
	}
	return digest
}

// review applies the waivers kept next to the manifest and reports its
// sign-off status.
func (a *auditor) review(cr *ConnectorReport) {
	cr.Signoff = SignoffStatus{Status: SignoffUnsigned}
	if a.m.Path == "" {
		return
	}
	a.applyWaivers()
	path := SignoffPath(a.m.Path)
	cr.Signoff.File = path
	s, err := ReadSignoff(path)
	switch {
	case errors.Is(err, ErrNotSigned):
		cr.Signoff.File = ""
		return
	case err != nil:
		cr.Signoff.Status = SignoffInvalid
		a.findings = append(a.findings, Finding{Severity: SeverityError, Code: CodeSignoffInvalid, Connector: a.m.Connector.Name,
			File: path, Message: fmt.Sprintf("the sign-off file does not parse: %v; sign again with connhost audit --sign", errors.Unwrap(err))})
		return
	}
	cr.Signoff.Reviewer, cr.Signoff.SignedAt = s.Reviewer, s.SignedAt.UTC().Format(time.RFC3339)
	module := ""
	if a.facts != nil {
		module = a.facts.ActualSHA256
	}
	if s.Connector != a.m.Connector.Name {
		cr.Signoff.Status = SignoffInvalid
		a.findings = append(a.findings, Finding{Severity: SeverityError, Code: CodeSignoffInvalid, Connector: a.m.Connector.Name,
			File: path, Message: fmt.Sprintf("the sign-off is for connector %q, not %q", s.Connector, a.m.Connector.Name)})
		return
	}
	if ch := s.Changes(a.m, module); len(ch) > 0 {
		cr.Signoff.Status, cr.Signoff.Changes = SignoffChanged, ch
		a.findings = append(a.findings, Finding{Severity: SeverityInfo, Code: CodeSignoffStale, Connector: a.m.Connector.Name,
			File: path, Message: fmt.Sprintf("signed off by %s on %s, but since then: %s; serve with require_signoff refuses it until it is signed again",
				s.Reviewer, cr.Signoff.SignedAt, strings.Join(ch, "; "))})
		return
	}
	cr.Signoff.Status = SignoffSigned
}

// applyWaivers marks the findings the waiver file accepts and reports
// waivers that are invalid, stale or unused.
func (a *auditor) applyWaivers() {
	path := WaiversPath(a.m.Path)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	bad := func(line int, format string, args ...any) {
		a.findings = append(a.findings, Finding{Severity: SeverityError, Code: CodeWaiverInvalid, Connector: a.m.Connector.Name,
			File: path, Line: line, Message: fmt.Sprintf(format, args...)})
	}
	if err != nil {
		bad(0, "cannot read the waivers: %v", err)
		return
	}
	var wf WaiverFile
	if err := decodeStrict(data, &wf); err != nil {
		bad(jsonErrorLine(data, err), "the waiver file does not parse: %v", err)
		return
	}
	if wf.Connector != "" && wf.Connector != a.m.Connector.Name {
		bad(0, "the waivers are for connector %q, not %q", wf.Connector, a.m.Connector.Name)
		return
	}
	lines := keyLines(data, "code")
	for i, w := range wf.Waivers {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		info := func(code Code, format string, args ...any) {
			a.findings = append(a.findings, Finding{Severity: severityOf(code), Code: code, Connector: a.m.Connector.Name,
				Operation: w.Operation, File: path, Line: line, Message: fmt.Sprintf(format, args...)})
		}
		sev := severityOf(w.Code)
		switch {
		case sev == "":
			bad(line, "waiver %d names %q, which is no finding code", i+1, w.Code)
			continue
		case sev == SeverityError:
			bad(line, "waiver %d waives %s, an error: errors cannot be waived (fix the manifest or the module)", i+1, w.Code)
			continue
		case strings.TrimSpace(w.Reviewer) == "" || strings.TrimSpace(w.Reason) == "":
			bad(line, "waiver %d of %s has no reviewer or no reason", i+1, w.Code)
			continue
		case !w.appliesTo(a.m):
			info(CodeWaiverStale, "waiver of %s by %s was given for manifest sha256 %s; this manifest is %s: it no longer applies (review the change and waive again)",
				w.Code, w.Reviewer, short(w.ManifestSHA256), short(a.m.Digest))
			continue
		}
		used := false
		for j := range a.findings {
			f := &a.findings[j]
			if f.Code == w.Code && f.Operation == w.Operation && f.Waived == nil && f.Severity != SeverityError {
				wc := w
				f.Waived = &wc
				used = true
			}
		}
		if !used {
			info(CodeWaiverUnused, "waiver of %s by %s matches no finding of this manifest: remove it", w.Code, w.Reviewer)
		}
	}
}

// moduleFindings are the waivable findings about the module rather than
// the manifest: a waiver of one applies to the manifest pinning the
// module the reviewer looked at, not to one re-pinned to another.
var moduleFindings = []Code{CodeUndeclaredOperation, CodeModuleNotChecked}

// appliesTo reports whether the waiver was given for m as it is: the same
// file, or (ReviewedSHA256) the same reviewed content pinned to another
// module, for a finding about the manifest.
func (w Waiver) appliesTo(m *manifests.Manifest) bool {
	if w.ManifestSHA256 == m.Digest {
		return true
	}
	return w.ReviewedSHA256 != "" && w.ReviewedSHA256 == m.ReviewDigest() && !slices.Contains(moduleFindings, w.Code)
}

// decodeStrict decodes one JSON value, refusing unknown fields and
// trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// jsonErrorLine returns the line of a JSON decoding error, or 0.
func jsonErrorLine(data []byte, err error) int {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// keyLines returns the line of every occurrence of the JSON key "key" in
// data, in order.
func keyLines(data []byte, key string) []int {
	var out []int
	needle := []byte(`"` + key + `"`)
	for i, line := range bytes.Split(data, []byte("\n")) {
		if bytes.Contains(line, needle) {
			out = append(out, i+1)
		}
	}
	return out
}

// writeFileJSON writes v as indented JSON to path atomically.
func writeFileJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	b = append(b, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(path), ".review-*.json")
	if err != nil {
		return fmt.Errorf("audit: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("audit: write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("audit: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("audit: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("audit: write %s: %w", path, err)
	}
	return nil
}
