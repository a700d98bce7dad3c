package audit

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"
)

// Summary counts findings or changes by severity. Waived findings (and
// allowed changes) are counted apart, not under their severity.
type Summary struct {
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
	// Waived counts waived findings, or allowed changes of a diff.
	Waived int `json:"waived"`
}

func (s Summary) String() string {
	out := fmt.Sprintf("%d %s, %d %s, %d %s",
		s.Errors, plural(s.Errors, "error"), s.Warnings, plural(s.Warnings, "warning"), s.Infos, plural(s.Infos, "info"))
	if s.Waived > 0 {
		out += fmt.Sprintf(", %d waived", s.Waived)
	}
	return out
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// Summary counts the report's findings by severity.
func (r Report) Summary() Summary {
	return Summary{Errors: r.Count(SeverityError), Warnings: r.Count(SeverityWarning), Infos: r.Count(SeverityInfo), Waived: r.Waived()}
}

// Summary counts the diff's changes by severity; allowed risk increases
// are counted as Waived.
func (d DiffReport) Summary() Summary {
	allowed := 0
	for _, c := range d.Changes {
		if c.Allowed {
			allowed++
		}
	}
	return Summary{Errors: d.Count(SeverityError), Warnings: d.Count(SeverityWarning), Infos: d.Count(SeverityInfo), Waived: allowed}
}

// FindingsSummary counts the findings of the new manifest's audit.
func (d DiffReport) FindingsSummary() Summary {
	return Report{Findings: d.Findings}.Summary()
}

// WriteJSON writes r as indented JSON:
// {"summary": {...}, "connectors": [...], "findings": [...]}. Field names
// are snake_case and stable.
func WriteJSON(w io.Writer, r Report) error {
	return writeJSON(w, struct {
		Summary    Summary           `json:"summary"`
		Connectors []ConnectorReport `json:"connectors"`
		Findings   []Finding         `json:"findings"`
	}{r.Summary(), nonNil(r.Connectors), nonNil(r.Findings)})
}

// WriteDiffJSON writes d as indented JSON with a "summary" object (of the
// changes) and a "findings_summary" object (of the new manifest's audit)
// first.
func WriteDiffJSON(w io.Writer, d DiffReport) error {
	d.Changes = nonNil(d.Changes)
	d.Findings = nonNil(d.Findings)
	return writeJSON(w, struct {
		Summary         Summary `json:"summary"`
		FindingsSummary Summary `json:"findings_summary"`
		DiffReport
	}{d.Summary(), d.FindingsSummary(), d})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WriteText writes r for humans: per connector its module, capabilities,
// limits, provider declaration and sign-off, an operation table and each
// operation's verdict; then every finding, then the summary.
func WriteText(w io.Writer, r Report) error {
	ew := &errWriter{w: w}
	for _, c := range r.Connectors {
		ew.printf("connector %s %s (%s)\n", c.Name, c.Version, c.File)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  manifest\tsha256 %s\n", c.ManifestSHA256)
		fmt.Fprintf(tw, "  module\t%s\n", moduleLine(c))
		fmt.Fprintf(tw, "  digest\tpinned %s, actual %s: %s\n", orDash(c.Module.PinnedSHA256), orDash(c.Module.ActualSHA256), c.Module.DigestStatus)
		fmt.Fprintf(tw, "  http\t%s\n", orDash(strings.Join(c.HTTP, ", ")))
		fmt.Fprintf(tw, "  config\t%s\n", orDash(strings.Join(c.Config, ", ")))
		fmt.Fprintf(tw, "  limits\tmemory %d MiB, timeout %s, output %d KiB, instances %d\n",
			c.Limits.MemoryMiB, c.Limits.Timeout, c.Limits.MaxOutputKiB, c.Limits.Instances)
		if c.Provider != nil {
			fmt.Fprintf(tw, "  provider\t%s\n", providerLine(c.Provider))
		}
		fmt.Fprintf(tw, "  sign-off\t%s\n", signoffLine(c.Signoff))
		if len(c.Undeclared) > 0 {
			fmt.Fprintf(tw, "  undeclared\t%s\n", strings.Join(c.Undeclared, ", "))
		}
		tw.Flush()
		ew.printf("\n")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  OPERATION\tEFFECT\tRECOVERY\tAPPROVAL\tTTL\tATTEMPTS\tPOLICY\tEXPORTS\n")
		for _, op := range c.Operations {
			ttl := "-"
			if op.RequiresApproval {
				ttl = op.ApprovalTTL
			}
			recovery := orDash(op.Recovery)
			if op.ReconcileSettle != "" {
				recovery += " (settle " + op.ReconcileSettle + ")"
			}
			if op.OutcomeDurability == "lazy" {
				recovery += ", lazy outcome"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", op.Name, op.Effect, recovery,
				yesNo(op.RequiresApproval), ttl, op.MaxAttempts, op.PolicyVersion, op.Exports)
		}
		tw.Flush()
		ew.printf("\n")
		for _, op := range c.Operations {
			v := op.Verdict
			ew.printf("  %s\n", op.Name)
			tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "    after a crash\t%s\n", v.AfterCrash)
			fmt.Fprintf(tw, "    relies on\t%s\n", v.ReliesOn)
			fmt.Fprintf(tw, "    approval\t%s\n", v.Approval)
			fmt.Fprintf(tw, "    dispatches\tat most %d per call\n", v.MaxDispatches)
			if v.Repeats != "" {
				fmt.Fprintf(tw, "    repeats\t%s\n", v.Repeats)
			}
			tw.Flush()
		}
		ew.printf("\n")
	}
	if len(r.Findings) > 0 {
		ew.printf("findings\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  SEVERITY\tCODE\tWHERE\tMESSAGE\n")
		for _, f := range r.Findings {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", severityText(f), f.Code, orDash(f.Where()), findingMessage(f))
		}
		tw.Flush()
		ew.printf("\n")
	}
	ew.printf("%s\n", r.Summary())
	return ew.err
}

func severityText(f Finding) string {
	if f.Waived != nil {
		return string(f.Severity) + " (waived)"
	}
	return string(f.Severity)
}

func findingMessage(f Finding) string {
	if f.Waived != nil {
		return f.Message + " [waived by " + f.Waived.Reviewer + ": " + f.Waived.Reason + "]"
	}
	return f.Message
}

func providerLine(p *ProviderReport) string {
	var parts []string
	if p.Name != "" {
		parts = append(parts, p.Name)
	}
	if p.Key != "" {
		s := fmt.Sprintf("deduplicates by %s, keys kept %s", p.Key, p.IdempotencyRetention)
		if p.Proof != nil {
			s += " (" + p.Proof.String() + ")"
		}
		parts = append(parts, s)
	}
	return orDash(strings.Join(parts, ": "))
}

func signoffLine(s SignoffStatus) string {
	switch s.Status {
	case SignoffSigned:
		return fmt.Sprintf("signed by %s at %s", s.Reviewer, s.SignedAt)
	case SignoffChanged:
		return fmt.Sprintf("CHANGED since %s signed it at %s: %s", s.Reviewer, s.SignedAt, strings.Join(s.Changes, "; "))
	case SignoffInvalid:
		return "invalid sign-off file " + s.File
	}
	return "not signed off"
}

func moduleLine(c ConnectorReport) string {
	m := c.Module
	s := m.File
	if m.Path != "" {
		s += " at " + m.Path
	}
	switch {
	case !m.Checked:
		s += ": not checked"
	case !m.Found:
		s += ": not found"
	default:
		s += fmt.Sprintf(": found, abi %d", m.ABI)
		if m.LoadError != "" {
			s += ", load error: " + m.LoadError
		}
	}
	return s
}

// WriteDiffText writes d for humans: a header line, one row per change
// with its lines in both files, then the findings of the new manifest.
func WriteDiffText(w io.Writer, d DiffReport) error {
	ew := &errWriter{w: w}
	ew.printf("diff %s %s (%s) -> %s (%s)\n", orDash(d.Connector), orDash(d.OldVersion), d.OldFile, orDash(d.NewVersion), d.NewFile)
	if len(d.Changes) == 0 {
		ew.printf("  no changes\n")
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  SEVERITY\tCODE\tOPERATION\tFIELD\tLINES\tOLD\tNEW\tMESSAGE\n")
		for _, c := range d.Changes {
			sev := string(c.Severity)
			if c.Allowed {
				sev += " (allowed)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sev, c.Code, orDash(c.Operation), c.Field, lines(c),
				orDash(oneLine(c.Old)), orDash(oneLine(c.New)), c.Message)
		}
		tw.Flush()
	}
	if len(d.Findings) > 0 {
		ew.printf("\nfindings\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  SEVERITY\tCODE\tWHERE\tMESSAGE\n")
		for _, f := range d.Findings {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", severityText(f), f.Code, orDash(f.Where()), findingMessage(f))
		}
		tw.Flush()
	}
	ew.printf("\nchanges: %s\nfindings: %s\n", d.Summary(), d.FindingsSummary())
	return ew.err
}

// lines formats a change's lines: "old:12 new:14", "new:20", or "-".
func lines(c Change) string {
	var parts []string
	if c.OldLine > 0 {
		parts = append(parts, fmt.Sprintf("old:%d", c.OldLine))
	}
	if c.NewLine > 0 {
		parts = append(parts, fmt.Sprintf("new:%d", c.NewLine))
	}
	return orDash(strings.Join(parts, " "))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

// WriteHTML writes r as one self-contained HTML page (inline CSS, no
// scripts, no external assets). Every finding is a table row with the
// classes "finding" and "sev-<severity>" and its code and message visible
// (a waived one also carries data-waived and who waived it why). Every
// connector shows its sign-off status (class "signoff-<status>") and a
// verdict per operation (rows of class "verdict"): what the host does
// after a crash, what that relies on, who approves, how many dispatches
// one call may make, and the hosts it may reach.
func WriteHTML(w io.Writer, r Report) error {
	return reportTmpl.Execute(w, struct {
		Report
		Summary Summary
	}{r, r.Summary()})
}

// WriteDiffHTML writes d as one self-contained HTML page; every change is a
// table row with the classes "change" and "sev-<severity>", and the new
// manifest's findings follow as in WriteHTML.
func WriteDiffHTML(w io.Writer, d DiffReport) error {
	return diffTmpl.Execute(w, struct {
		DiffReport
		Summary         Summary
		FindingsSummary Summary
	}{d, d.Summary(), d.FindingsSummary()})
}

const pageCSS = `
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;overflow-wrap:anywhere}
@media (max-width:640px){body{margin:1em}}
th{background:#f3f3f3}
code,.code{font-family:ui-monospace,monospace}
.sev-error{background:#fde2e2}
.sev-warning{background:#fff4d6}
.sev-info{background:#e8f1fd}
tr[data-waived]{background:#eee;color:#555}
.badge{font-weight:bold;text-transform:uppercase;font-size:.8em}
.summary{font-weight:bold}
.signoff-signed{color:#135e13;font-weight:bold}
.signoff-changed,.signoff-invalid{color:#a40000;font-weight:bold}
.signoff-unsigned{color:#7a5b00;font-weight:bold}
`

var funcs = template.FuncMap{"yesNo": yesNo, "orDash": orDash, "join": strings.Join, "lines": lines}

const findingsTable = `{{define "findings"}}{{if .}}<table id="findings">
<thead><tr><th>Severity</th><th>Code</th><th>Where</th><th>Message</th><th>Waived</th></tr></thead>
<tbody>
{{range .}}<tr class="finding sev-{{.Severity}}" data-code="{{.Code}}"{{if .Waived}} data-waived="true"{{end}}><td class="badge">{{.Severity}}</td><td class="code">{{.Code}}</td><td>{{orDash .Where}}</td><td class="message">{{.Message}}</td><td class="waiver">{{with .Waived}}by {{.Reviewer}}: {{.Reason}}{{else}}-{{end}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p>No findings.</p>{{end}}{{end}}`

var reportTmpl = template.Must(template.Must(template.New("report").Funcs(funcs).Parse(findingsTable)).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>connhost audit</title>
<style>` + pageCSS + `</style>
</head>
<body>
<h1>connhost audit</h1>
<p class="summary" id="summary">{{.Summary}}</p>
<h2>Findings</h2>
{{template "findings" .Findings}}
{{range .Connectors}}<section class="connector" id="connector-{{.Name}}">
<h2>Connector <code>{{.Name}}</code> {{.Version}}</h2>
<table>
<tr><th>Sign-off</th><td class="signoff signoff-{{.Signoff.Status}}">{{if eq .Signoff.Status "signed"}}signed by {{.Signoff.Reviewer}} at {{.Signoff.SignedAt}}{{else if eq .Signoff.Status "changed"}}changed since {{.Signoff.Reviewer}} signed it at {{.Signoff.SignedAt}}:<ul>{{range .Signoff.Changes}}<li>{{.}}</li>{{end}}</ul>{{else if eq .Signoff.Status "invalid"}}invalid sign-off file <code>{{.Signoff.File}}</code>{{else}}not signed off{{end}}</td></tr>
<tr><th>Manifest</th><td><code>{{.File}}</code> sha256 <code>{{.ManifestSHA256}}</code></td></tr>
<tr><th>Module</th><td><code>{{.Module.File}}</code>{{if .Module.Path}} at <code>{{.Module.Path}}</code>{{end}}: {{if not .Module.Checked}}not checked{{else if not .Module.Found}}not found{{else}}found, abi {{.Module.ABI}}{{if .Module.LoadError}}, load error: {{.Module.LoadError}}{{end}}{{end}}</td></tr>
<tr><th>Digest</th><td>pinned <code>{{orDash .Module.PinnedSHA256}}</code>, actual <code>{{orDash .Module.ActualSHA256}}</code>: <span class="digest-{{.Module.DigestStatus}}">{{.Module.DigestStatus}}</span></td></tr>
<tr><th>HTTP</th><td>{{range .HTTP}}<code>{{.}}</code> {{else}}-{{end}}</td></tr>
<tr><th>Config</th><td>{{range .Config}}<code>{{.}}</code> {{else}}-{{end}}</td></tr>
<tr><th>Limits</th><td>memory {{.Limits.MemoryMiB}} MiB, timeout {{.Limits.Timeout}}, output {{.Limits.MaxOutputKiB}} KiB, instances {{.Limits.Instances}}</td></tr>
{{with .Provider}}<tr><th>Provider</th><td>{{orDash .Name}}{{if .Key}}: deduplicates by <code>{{.Key}}</code>, keys kept {{.IdempotencyRetention}}{{end}} (declared by the manifest{{with .Proof}}; {{.}}{{end}})</td></tr>{{end}}
{{if .Undeclared}}<tr><th>Undeclared</th><td>{{join .Undeclared ", "}}</td></tr>{{end}}
</table>
<table class="operations">
<thead><tr><th>Operation</th><th>Effect</th><th>Recovery</th><th>Approval</th><th>TTL</th><th>Attempts</th><th>Policy version</th><th>Exports</th><th>Description</th></tr></thead>
<tbody>
{{range .Operations}}<tr><td><code>{{.Name}}</code></td><td>{{.Effect}}</td><td>{{orDash .Recovery}}{{if .ReconcileSettle}} (settle {{.ReconcileSettle}}){{end}}{{if eq .OutcomeDurability "lazy"}}, lazy outcome{{end}}</td><td>{{yesNo .RequiresApproval}}</td><td>{{if .RequiresApproval}}{{.ApprovalTTL}}{{else}}-{{end}}</td><td>{{.MaxAttempts}}</td><td><code>{{.PolicyVersion}}</code></td><td>{{.Exports}}</td><td>{{.Description}}</td></tr>
{{end}}</tbody>
</table>
<table class="verdicts">
<thead><tr><th>Operation</th><th>After a crash the host</th><th>That relies on</th><th>Approval</th><th>Dispatches per call</th><th>Hosts reachable</th><th>A repeat under a new id</th></tr></thead>
<tbody>
{{range .Operations}}<tr class="verdict" data-operation="{{.Name}}"><td><code>{{.Name}}</code></td><td class="after-crash">{{.Verdict.AfterCrash}}</td><td class="relies-on">{{.Verdict.ReliesOn}}</td><td class="approval">{{.Verdict.Approval}}</td><td class="max-dispatches">{{.Verdict.MaxDispatches}}</td><td class="hosts">{{range .Verdict.Hosts}}<code>{{.}}</code> {{else}}none{{end}}</td><td class="repeats">{{or .Verdict.Repeats "-"}}</td></tr>
{{end}}</tbody>
</table>
</section>
{{end}}</body>
</html>
`))

var diffTmpl = template.Must(template.Must(template.New("diff").Funcs(funcs).Parse(findingsTable)).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>connhost audit --diff {{.Connector}}</title>
<style>` + pageCSS + `</style>
</head>
<body>
<h1>connhost audit --diff <code>{{.Connector}}</code></h1>
<p>{{.OldVersion}} (<code>{{.OldFile}}</code>) &rarr; {{.NewVersion}} (<code>{{.NewFile}}</code>)</p>
<p class="summary" id="summary">changes: {{.Summary}}; findings: {{.FindingsSummary}}</p>
{{if .Changes}}<table id="changes">
<thead><tr><th>Severity</th><th>Code</th><th>Operation</th><th>Field</th><th>Lines</th><th>Old</th><th>New</th><th>Message</th></tr></thead>
<tbody>
{{range .Changes}}<tr class="change sev-{{.Severity}}" data-code="{{.Code}}"{{if .Allowed}} data-allowed="true"{{end}}><td class="badge">{{.Severity}}{{if .Allowed}} (allowed){{end}}</td><td class="code">{{.Code}}</td><td>{{orDash .Operation}}</td><td>{{.Field}}</td><td class="lines">{{lines .}}</td><td><code>{{orDash .Old}}</code></td><td><code>{{orDash .New}}</code></td><td class="message">{{.Message}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p>No changes.</p>{{end}}
<h2>Findings of the new manifest</h2>
{{template "findings" .Findings}}
</body>
</html>
`))
