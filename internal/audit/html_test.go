package audit

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dumpDOM renders page in headless Chromium and returns the serialised
// DOM. It skips the test only when no chromium binary is installed (CI
// installs Debian's chromium package).
func dumpDOM(t *testing.T, page []byte) string {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("SKIP: no chromium binary on PATH (apt-get install -y chromium); the HTML report was not rendered")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	if err := os.WriteFile(file, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "profile"),
		"--dump-dom", "file://"+file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Chromium forks helpers: run it in its own process group and kill the
	// group on timeout and afterwards, so no helper outlives the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := stdout.String()
	if !strings.Contains(dom, "</html>") {
		t.Fatalf("chromium returned no DOM:\n%s\n%s", dom, stderr.String())
	}
	return dom
}

// rows returns the <tr> elements of dom whose class list starts with
// class, unescaped to plain text-ish HTML.
func rows(dom, class string) []string {
	var out []string
	for _, part := range strings.Split(dom, "<tr ")[1:] {
		if strings.HasPrefix(part, `class="`+class+" ") || strings.HasPrefix(part, `class="`+class+`"`) {
			out = append(out, html.UnescapeString(part[:strings.Index(part, "</tr>")]))
		}
	}
	return out
}

// TestHTMLReportInChromium renders one report holding the findings of
// every audit test case and checks that the browser shows every finding:
// one row per finding, in order, with its severity class, code and message.
func TestHTMLReportInChromium(t *testing.T) {
	var all Report
	names := make([]string, 0, len(auditCases))
	for name := range auditCases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := auditCase(t, name)
		all.Connectors = append(all.Connectors, r.Connectors...)
		all.Findings = append(all.Findings, r.Findings...)
	}
	sortFindings(all.Findings)
	var page bytes.Buffer
	if err := WriteHTML(&page, all); err != nil {
		t.Fatal(err)
	}
	assertSelfContained(t, page.String())
	dom := dumpDOM(t, page.Bytes())

	got := rows(dom, "finding")
	if len(got) != len(all.Findings) {
		t.Fatalf("%d finding rows in the DOM, want %d", len(got), len(all.Findings))
	}
	for i, f := range all.Findings {
		row := got[i]
		for _, want := range []string{
			`class="finding sev-` + string(f.Severity) + `"`,
			`<td class="code">` + string(f.Code) + `</td>`,
			`<td class="message">` + f.Message + `</td>`,
		} {
			if !strings.Contains(row, want) {
				t.Errorf("finding %d (%s): rendered row lacks %q:\n%s", i, f.Code, want, row)
			}
		}
	}
	text := html.UnescapeString(dom)
	if !strings.Contains(text, all.Summary().String()) {
		t.Errorf("summary %q not shown", all.Summary())
	}
	for _, c := range all.Connectors {
		if !strings.Contains(text, `id="connector-`+c.Name+`"`) {
			t.Errorf("connector %s not shown", c.Name)
		}
	}
	// Every operation's verdict, and every connector's sign-off status.
	verdicts := rows(dom, "verdict")
	n := 0
	for _, c := range all.Connectors {
		for _, op := range c.Operations {
			if n >= len(verdicts) {
				t.Fatalf("%d verdict rows, want more", len(verdicts))
			}
			row := verdicts[n]
			n++
			for _, want := range []string{
				`data-operation="` + op.Name + `"`,
				`<td class="after-crash">` + op.Verdict.AfterCrash + `</td>`,
				`<td class="relies-on">` + op.Verdict.ReliesOn + `</td>`,
				fmt.Sprintf(`<td class="max-dispatches">%d</td>`, op.Verdict.MaxDispatches),
			} {
				if !strings.Contains(row, want) {
					t.Errorf("%s/%s: verdict row lacks %q:\n%s", c.Name, op.Name, want, row)
				}
			}
			for _, h := range op.Verdict.Hosts {
				if !strings.Contains(row, "<code>"+h+"</code>") {
					t.Errorf("%s/%s: verdict row lacks host %s", c.Name, op.Name, h)
				}
			}
		}
	}
	if n != len(verdicts) {
		t.Errorf("%d verdict rows, want %d", len(verdicts), n)
	}
	statuses := map[string]int{}
	for _, c := range all.Connectors {
		statuses[c.Signoff.Status]++
	}
	for st, want := range statuses {
		if got := strings.Count(dom, `class="signoff signoff-`+st+`"`); got != want {
			t.Errorf("sign-off %s shown %d times, want %d", st, got, want)
		}
	}
	for _, st := range []string{SignoffSigned, SignoffChanged, SignoffUnsigned, SignoffInvalid} {
		if statuses[st] == 0 {
			t.Errorf("no test case shows sign-off status %s", st)
		}
	}
	if !strings.Contains(text, "signed by rita at 2025-06-01T10:00:00Z") {
		t.Error("the signed connector does not say who signed it when")
	}
	// A waived finding says by whom and why.
	for i, f := range all.Findings {
		if f.Waived != nil && !strings.Contains(got[i], `data-waived="true"`) {
			t.Errorf("waived finding %s not marked", f.Code)
		}
	}
}

func TestDiffHTMLInChromium(t *testing.T) {
	d := DiffPaths("testdata/diff/risk/old.toml", "testdata/diff/risk/new.toml", DiffOptions{Allow: []Code{CodeHostAdded}})
	if len(d.Findings) == 0 {
		t.Fatal("the new manifest's audit found nothing to show")
	}
	var page bytes.Buffer
	if err := WriteDiffHTML(&page, d); err != nil {
		t.Fatal(err)
	}
	assertSelfContained(t, page.String())
	dom := dumpDOM(t, page.Bytes())
	got := rows(dom, "change")
	if len(got) != len(d.Changes) {
		t.Fatalf("%d change rows in the DOM, want %d", len(got), len(d.Changes))
	}
	for i, c := range d.Changes {
		for _, want := range []string{
			`class="change sev-` + string(c.Severity) + `"`,
			`<td class="code">` + string(c.Code) + `</td>`,
			`<td class="message">` + c.Message + `</td>`,
			`<td class="lines">` + lines(c) + `</td>`,
		} {
			if !strings.Contains(got[i], want) {
				t.Errorf("change %d (%s): rendered row lacks %q:\n%s", i, c.Code, want, got[i])
			}
		}
		if c.Allowed != strings.Contains(got[i], `data-allowed="true"`) {
			t.Errorf("change %d (%s): allowed %t not shown", i, c.Code, c.Allowed)
		}
	}
	if f := rows(dom, "finding"); len(f) != len(d.Findings) {
		t.Errorf("%d finding rows, want the new manifest's %d", len(f), len(d.Findings))
	}
}

// assertSelfContained: no scripts and nothing loaded from elsewhere.
func assertSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"<script", "<link", " src=", "http://", "https://", "@import", "url("} {
		if bad == "http://" || bad == "https://" {
			// Origins appear as text; they must never be attributes.
			if strings.Contains(page, `="`+bad) {
				t.Errorf("page references an external asset: %s", bad)
			}
			continue
		}
		if strings.Contains(page, bad) {
			t.Errorf("page is not self-contained: contains %q", bad)
		}
	}
}
