package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/connhost/connhost/internal/wasmbuild"
)

var (
	// rationaleLink is a Markdown link into RATIONALE.md with an anchor:
	// "](RATIONALE.md#why-…)", "](../RATIONALE.md#…)", or "](#…)" inside
	// RATIONALE.md itself.
	rationaleLink = regexp.MustCompile(`\]\((?:(?:\.\./)*RATIONALE\.md)?#([^)\s]+)\)`)
	// rationaleQuestion is a citation of a heading by its question:
	// RATIONALE.md, "Why …?" (or 'Why …?', or in parentheses).
	rationaleQuestion = regexp.MustCompile(`RATIONALE\.md\x60?,?\s*\(?\s*["']((?:Why|What|Which|When|How)\b.*?\?)["']`)
	// rationaleSection is a citation of a heading that is not a question:
	// RATIONALE.md, "Kill-storm soak".
	rationaleSection = regexp.MustCompile(`RATIONALE\.md\x60?,?\s*\(?\s*"([A-Z][^"?(){}]{0,80})"`)
	// rationaleAlso is a second question cited with the first:
	// RATIONALE.md, "Why …?" and "Why …?".
	rationaleAlso = regexp.MustCompile(`^\s*and\s*["']((?:Why|What|Which|When|How)\b.*?\?)["']`)
	// commentBreak joins a comment or paragraph that wraps a citation.
	commentBreak = regexp.MustCompile(`\s*\n\s*(?://\s*)?`)
)

// rationaleHeadings reads RATIONALE.md's headings (sections and their
// questions) and the anchors GitHub gives them.
func rationaleHeadings(t *testing.T, repo string) (headings, anchors map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "RATIONALE.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings, anchors = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		h, ok := strings.CutPrefix(line, "## ")
		if !ok {
			h, ok = strings.CutPrefix(line, "### ")
		}
		if !ok {
			continue
		}
		if headings[h] {
			t.Errorf("RATIONALE.md: heading %q twice", h)
		}
		headings[h] = true
		anchors[githubAnchor(h)] = true
	}
	return headings, anchors
}

// githubAnchor is the fragment GitHub renders for a heading: lower case,
// punctuation dropped, spaces as hyphens.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f && isLetter(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isLetter(r rune) bool { return strings.ToLower(string(r)) != strings.ToUpper(string(r)) }

// TestRationaleCitationsResolve: every link into RATIONALE.md with an
// anchor (from the README, docs/, BENCHMARKS.md, CHANGELOG.md and
// RATIONALE.md's own contents) names a heading it has, every citation of a
// heading by its text (`See RATIONALE.md, "Why …?"`, in code and pages)
// names one word for word, and Go code never points at RATIONALE.md
// without naming the heading: moving or rephrasing a decision cannot leave
// a reader at a heading that is gone.
func TestRationaleCitationsResolve(t *testing.T) {
	repo, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	headings, anchors := rationaleHeadings(t, repo)
	if len(headings) < 100 {
		t.Fatalf("RATIONALE.md: %d headings; the parse found too few to check anything", len(headings))
	}
	links, citations := 0, 0
	err = filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "bin", "build", ".connhost", "target":
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(path)
		if ext != ".go" && ext != ".md" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		if !strings.Contains(text, "RATIONALE.md") && filepath.Base(path) != "RATIONALE.md" {
			return nil
		}
		rel, _ := filepath.Rel(repo, path)
		if filepath.ToSlash(rel) == "cmd/connhost/rationale_test.go" {
			return nil // this test's own patterns and messages
		}
		if ext == ".md" {
			for _, m := range rationaleLink.FindAllStringSubmatch(text, -1) {
				if !strings.Contains(m[0], "RATIONALE.md") && filepath.Base(path) != "RATIONALE.md" {
					continue // an anchor of the page itself
				}
				links++
				if !anchors[m[1]] {
					t.Errorf("%s: link %s: RATIONALE.md has no heading with that anchor", rel, m[0])
				}
			}
		}
		joined := commentBreak.ReplaceAllString(text, " ")
		cited := map[int]bool{}
		for _, m := range rationaleQuestion.FindAllStringSubmatchIndex(joined, -1) {
			citations++
			cited[m[0]] = true
			if q := joined[m[2]:m[3]]; !headings[q] {
				t.Errorf("%s: cites RATIONALE.md, %q: no such heading", rel, q)
			}
			if also := rationaleAlso.FindStringSubmatch(joined[m[1]:]); also != nil {
				citations++
				if !headings[also[1]] {
					t.Errorf("%s: cites RATIONALE.md, %q: no such heading", rel, also[1])
				}
			}
		}
		for _, m := range rationaleSection.FindAllStringSubmatchIndex(joined, -1) {
			if cited[m[0]] {
				continue
			}
			citations++
			cited[m[0]] = true
			if s := joined[m[2]:m[3]]; !headings[s] {
				t.Errorf("%s: cites RATIONALE.md, %q: no such heading", rel, s)
			}
		}
		if ext == ".go" {
			for _, i := range regexp.MustCompile(`RATIONALE\.md`).FindAllStringIndex(joined, -1) {
				if !cited[i[0]] {
					end := min(len(joined), i[1]+40)
					t.Errorf("%s: %q points at RATIONALE.md without naming the heading", rel, joined[i[0]:end])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d headings, %d anchored links, %d citations checked", len(headings), links, citations)
}
