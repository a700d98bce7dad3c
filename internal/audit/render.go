package audit

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"
)

// Summary counts findings or changes by severity.
type Summary struct {
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

func (s Summary) String() string {
	return fmt.Sprintf("%d %s, %d %s, %d %s",
		s.Errors, plural(s.Errors, "error"), s.Warnings, plural(s.Warnings, "warning"), s.Infos, plural(s.Infos, "info"))
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// Summary counts the report's findings by severity.
func (r Report) Summary() Summary {
	return Summary{Errors: r.Count(SeverityError), Warnings: r.Count(SeverityWarning), Infos: r.Count(SeverityInfo)}
}

// Summary counts the diff's changes by severity.
func (d DiffReport) Summary() Summary {
	return Summary{Errors: d.Count(SeverityError), Warnings: d.Count(SeverityWarning), Infos: d.Count(SeverityInfo)}
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

// WriteDiffJSON writes d as indented JSON with a "summary" object first.
func WriteDiffJSON(w io.Writer, d DiffReport) error {
	d.Changes = nonNil(d.Changes)
	return writeJSON(w, struct {
		Summary Summary `json:"summary"`
		DiffReport
	}{d.Summary(), d})
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
// limits and an operation table, then every finding, then the summary.
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
	}
	if len(r.Findings) > 0 {
		ew.printf("findings\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  SEVERITY\tCODE\tWHERE\tMESSAGE\n")
		for _, f := range r.Findings {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Severity, f.Code, orDash(f.Where()), f.Message)
		}
		tw.Flush()
		ew.printf("\n")
	}
	ew.printf("%s\n", r.Summary())
	return ew.err
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

// WriteDiffText writes d for humans: a header line and one row per change.
func WriteDiffText(w io.Writer, d DiffReport) error {
	ew := &errWriter{w: w}
	ew.printf("diff %s %s (%s) -> %s (%s)\n", d.Connector, d.OldVersion, d.OldFile, d.NewVersion, d.NewFile)
	if len(d.Changes) == 0 {
		ew.printf("  no changes\n")
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  SEVERITY\tCODE\tOPERATION\tFIELD\tOLD\tNEW\tMESSAGE\n")
		for _, c := range d.Changes {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Severity, c.Code, orDash(c.Operation), c.Field,
				orDash(oneLine(c.Old)), orDash(oneLine(c.New)), c.Message)
		}
		tw.Flush()
	}
	ew.printf("\n%s\n", d.Summary())
	return ew.err
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
// classes "finding" and "sev-<severity>" and its code and message visible.
func WriteHTML(w io.Writer, r Report) error {
	return reportTmpl.Execute(w, struct {
		Report
		Summary Summary
	}{r, r.Summary()})
}

// WriteDiffHTML writes d as one self-contained HTML page; every change is a
// table row with the classes "change" and "sev-<severity>".
func WriteDiffHTML(w io.Writer, d DiffReport) error {
	return diffTmpl.Execute(w, struct {
		DiffReport
		Summary Summary
	}{d, d.Summary()})
}

const pageCSS = `
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}
code,.code{font-family:ui-monospace,monospace}
.sev-error{background:#fde2e2}
.sev-warning{background:#fff4d6}
.sev-info{background:#e8f1fd}
.badge{font-weight:bold;text-transform:uppercase;font-size:.8em}
.summary{font-weight:bold}
`

var funcs = template.FuncMap{"yesNo": yesNo, "orDash": orDash, "join": strings.Join}

var reportTmpl = template.Must(template.New("report").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>connhost audit</title>
<style>` + pageCSS + `</style>
</head>
<body>
<h1>connhost audit</h1>
<p class="summary" id="summary">{{.Summary}}</p>
<h2>Findings</h2>
{{if .Findings}}<table id="findings">
<thead><tr><th>Severity</th><th>Code</th><th>Where</th><th>Message</th></tr></thead>
<tbody>
{{range .Findings}}<tr class="finding sev-{{.Severity}}" data-code="{{.Code}}"><td class="badge">{{.Severity}}</td><td class="code">{{.Code}}</td><td>{{orDash .Where}}</td><td class="message">{{.Message}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p>No findings.</p>{{end}}
{{range .Connectors}}<section class="connector" id="connector-{{.Name}}">
<h2>Connector <code>{{.Name}}</code> {{.Version}}</h2>
<table>
<tr><th>Manifest</th><td><code>{{.File}}</code> sha256 <code>{{.ManifestSHA256}}</code></td></tr>
<tr><th>Module</th><td><code>{{.Module.File}}</code>{{if .Module.Path}} at <code>{{.Module.Path}}</code>{{end}}: {{if not .Module.Checked}}not checked{{else if not .Module.Found}}not found{{else}}found, abi {{.Module.ABI}}{{if .Module.LoadError}}, load error: {{.Module.LoadError}}{{end}}{{end}}</td></tr>
<tr><th>Digest</th><td>pinned <code>{{orDash .Module.PinnedSHA256}}</code>, actual <code>{{orDash .Module.ActualSHA256}}</code>: <span class="digest-{{.Module.DigestStatus}}">{{.Module.DigestStatus}}</span></td></tr>
<tr><th>HTTP</th><td>{{range .HTTP}}<code>{{.}}</code> {{else}}-{{end}}</td></tr>
<tr><th>Config</th><td>{{range .Config}}<code>{{.}}</code> {{else}}-{{end}}</td></tr>
<tr><th>Limits</th><td>memory {{.Limits.MemoryMiB}} MiB, timeout {{.Limits.Timeout}}, output {{.Limits.MaxOutputKiB}} KiB, instances {{.Limits.Instances}}</td></tr>
{{if .Undeclared}}<tr><th>Undeclared</th><td>{{join .Undeclared ", "}}</td></tr>{{end}}
</table>
<table class="operations">
<thead><tr><th>Operation</th><th>Effect</th><th>Recovery</th><th>Approval</th><th>TTL</th><th>Attempts</th><th>Policy version</th><th>Exports</th><th>Description</th></tr></thead>
<tbody>
{{range .Operations}}<tr><td><code>{{.Name}}</code></td><td>{{.Effect}}</td><td>{{orDash .Recovery}}{{if .ReconcileSettle}} (settle {{.ReconcileSettle}}){{end}}{{if eq .OutcomeDurability "lazy"}}, lazy outcome{{end}}</td><td>{{yesNo .RequiresApproval}}</td><td>{{if .RequiresApproval}}{{.ApprovalTTL}}{{else}}-{{end}}</td><td>{{.MaxAttempts}}</td><td><code>{{.PolicyVersion}}</code></td><td>{{.Exports}}</td><td>{{.Description}}</td></tr>
{{end}}</tbody>
</table>
</section>
{{end}}</body>
</html>
`))

var diffTmpl = template.Must(template.New("diff").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>connhost audit --diff {{.Connector}}</title>
<style>` + pageCSS + `</style>
</head>
<body>
<h1>connhost audit --diff <code>{{.Connector}}</code></h1>
<p>{{.OldVersion}} (<code>{{.OldFile}}</code>) &rarr; {{.NewVersion}} (<code>{{.NewFile}}</code>)</p>
<p class="summary" id="summary">{{.Summary}}</p>
{{if .Changes}}<table id="changes">
<thead><tr><th>Severity</th><th>Code</th><th>Operation</th><th>Field</th><th>Old</th><th>New</th><th>Message</th></tr></thead>
<tbody>
{{range .Changes}}<tr class="change sev-{{.Severity}}" data-code="{{.Code}}"><td class="badge">{{.Severity}}</td><td class="code">{{.Code}}</td><td>{{orDash .Operation}}</td><td>{{.Field}}</td><td><code>{{orDash .Old}}</code></td><td><code>{{orDash .New}}</code></td><td class="message">{{.Message}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p>No changes.</p>{{end}}
</body>
</html>
`))
