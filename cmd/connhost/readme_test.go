package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// recipeBound bounds one recipe of the docs: it builds connhost, starts
// processes and waits out a retry budget (about 30 s on a loaded 2-core
// machine; a recipe waiting for a process that died ends here).
const recipeBound = 5 * time.Minute

// TestREADMERecipes runs the recipes of README.md and docs/*.md as a
// reader pastes them, against real processes, and compares what they
// print with what the page says they print. It finds each section by its
// heading, in whichever page holds it:
//
//   - "Try it" (README.md): its sh block, against `connhost dev` (the
//     README's first command) on a new data directory;
//   - "Crash it yourself" (README.md) and "A provider still processing the
//     killed attempt" (docs/crash-matrix.md, which continues it): their sh
//     blocks, one after the other in one shell, as written: they build
//     connhost, start the sandbox and dev, let dev kill itself, kill it,
//     restart it and resolve a call;
//   - "MCP" (docs/runtimes.md): the stdio session, sent line by line to
//     `connhost mcp`, with the config the page describes (rita approves in
//     the client, the payments connector on the sandbox).
//
// A line "#   → TEXT" (continued by lines "#     TEXT") is what the
// command above it prints: each line's pieces between "…" must appear in
// that output in order, whitespace aside; three spaces and a parenthesis
// start a remark. In the MCP session each "<<" message is compared the same
// way with the server's next message that has an id. Messages name the
// page and line ("docs/runtimes.md:212"). TestDocRecipesAccountedFor keeps
// every other sh block of those pages on a list of what is not run, and why.
//
// The recipes run in a directory laid out like the repository's root (its
// entries linked, build/ holding the connectors built from today's
// sources), with their fixed ports (8420, 8421, 12111 and 12112) replaced
// by free ones, the one change made to them. What they leave at the top of
// that directory must be ignored by git.
func TestREADMERecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs the recipes of README.md and docs/*.md as real processes")
	}
	repo, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	pages := readDocPages(t, repo)
	bin := buildConnhost(t, t.TempDir())
	modules := map[string][]byte{}
	for _, name := range []string{"payments", "email"} {
		path, _, err := wasmbuild.Cached(t.Context(), filepath.Join(repo, "plugins", name))
		if err != nil {
			t.Fatal(err)
		}
		if modules[name+".wasm"], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("Try it", func(t *testing.T) {
		root := recipeRoot(t, repo, modules)
		ports := freeRecipePorts(t)
		dev, err := proc.Start(proc.Cmd{
			Path: bin, Args: []string{"dev", "--listen", ports.addr("127.0.0.1:8420")},
			Dir: root, Env: cliEnv(), DieWithParent: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(dev.Kill)
		waitHealthy(t, "http://"+ports.addr("127.0.0.1:8420"), dev)
		runRecipe(t, root, ports, sectionBlocks(t, pages, "Try it", "sh"))
		if t.Failed() {
			t.Logf("connhost dev's stderr:\n%s", dev.Stderr())
		}
		checkIgnored(t, repo, root)
	})

	t.Run("Crash it yourself", func(t *testing.T) {
		root := recipeRoot(t, repo, modules)
		var blocks [][]recipeLine
		for _, name := range crashRecipeSections {
			blocks = append(blocks, sectionBlocks(t, pages, name, "sh")...)
		}
		runRecipe(t, root, freeRecipePorts(t), blocks)
		if t.Failed() {
			for _, log := range []string{"sandbox.log", "dev.log"} {
				b, _ := os.ReadFile(filepath.Join(root, ".sandbox", log))
				t.Logf(".sandbox/%s:\n%s", log, b)
			}
		}
		checkIgnored(t, repo, root)
	})

	t.Run("MCP", func(t *testing.T) {
		root := recipeRoot(t, repo, modules)
		blocks := sectionBlocks(t, pages, "MCP", "text")
		i := slices.IndexFunc(blocks, func(b []recipeLine) bool { return strings.HasPrefix(b[0].text, ">> ") })
		if i < 0 {
			t.Fatalf(`%s: the MCP section has no text block of ">>" and "<<" lines`, blocks[0][0].at)
		}
		runMCPSession(t, bin, root, blocks[i])
	})
}

// shRecipeSections are the sections whose sh blocks TestREADMERecipes
// runs: "Try it" on its own, the others as one script.
var (
	shRecipeSections    = append([]string{"Try it"}, crashRecipeSections...)
	crashRecipeSections = []string{"Crash it yourself", "A provider still processing the killed attempt"}
)

// docPage is a page of the documentation: README.md or docs/*.md.
type docPage struct {
	path  string // as messages name it: "README.md", "docs/runtimes.md"
	lines []string
}

// readDocPages reads README.md and docs/*.md.
func readDocPages(t *testing.T, repo string) []docPage {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var pages []docPage
	for _, path := range append([]string{filepath.Join(repo, "README.md")}, docs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repo, path)
		pages = append(pages, docPage{path: filepath.ToSlash(rel), lines: strings.Split(string(b), "\n")})
	}
	return pages
}

// recipeLine is a line of a code block and where it is ("README.md:70").
type recipeLine struct {
	at   string
	text string
}

// docBlock is a fenced code block of a page: its language, the headings
// it sits under (outermost first) and its lines.
type docBlock struct {
	page     string
	lang     string
	headings []string
	lines    []recipeLine
}

var headingLine = regexp.MustCompile(`^(#{1,6}) +(.+?) *$`)

// blocksOf returns the fenced code blocks of p. A heading of level n
// closes every section of level n or deeper; fences may be indented (a
// block in a list item).
func blocksOf(p docPage) []docBlock {
	var (
		blocks   []docBlock
		headings []string
		in       *docBlock
	)
	for i, l := range p.lines {
		fence := strings.TrimSpace(l)
		switch {
		case in == nil && strings.HasPrefix(fence, "```"):
			blocks = append(blocks, docBlock{page: p.path, lang: strings.TrimPrefix(fence, "```"), headings: slices.Clone(headings)})
			in = &blocks[len(blocks)-1]
		case in != nil && fence == "```":
			in = nil
		case in != nil:
			in.lines = append(in.lines, recipeLine{at: fmt.Sprintf("%s:%d", p.path, i+1), text: l})
		default:
			if m := headingLine.FindStringSubmatch(l); m != nil {
				level := len(m[1])
				for len(headings) < level-1 {
					headings = append(headings, "")
				}
				headings = append(headings[:level-1], m[2])
			}
		}
	}
	return blocks
}

// sectionBlocks returns the code blocks of language lang in the section
// headed name (at any level, its subsections included), in order. The
// section must be in exactly one page.
func sectionBlocks(t *testing.T, pages []docPage, name, lang string) [][]recipeLine {
	t.Helper()
	var blocks [][]recipeLine
	var found []string
	for _, p := range pages {
		n := len(blocks)
		for _, b := range blocksOf(p) {
			if b.lang == lang && slices.Contains(b.headings, name) && len(b.lines) > 0 {
				blocks = append(blocks, b.lines)
			}
		}
		if len(blocks) > n {
			found = append(found, p.path)
		}
	}
	if len(found) > 1 {
		t.Fatalf("%s blocks of a section %q are in %s: the recipe test cannot tell which one a reader pastes", lang, name, strings.Join(found, " and "))
	}
	if len(blocks) == 0 {
		t.Fatalf("neither README.md nor docs/*.md has a %s block in a section %q", lang, name)
	}
	return blocks
}

// recipeRoot returns a directory laid out like the repository's root: each
// of its entries linked, except .git and what .gitignore names at the top
// (what the recipes and the README's first command write: build/, bin/,
// dev's .connhost/ and its witness .connhost.witness, .sandbox/), so that a
// `connhost dev` run in the same clone before the tests leaves nothing a
// recipe could pick up. build/ is a directory of its own holding modules,
// named as the manifests name them.
func recipeRoot(t *testing.T, repo string, modules map[string][]byte) string {
	t.Helper()
	root := t.TempDir()
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	skip := append(topIgnored(t, repo), ".git")
	embedded := rootEmbeds(t, repo)
	for _, e := range entries {
		if slices.Contains(skip, e.Name()) {
			continue
		}
		if files, ok := embedded[e.Name()]; ok {
			// go:embed refuses a symlinked directory or file: the
			// directory is real, the files the root package embeds are
			// copies and the rest are links.
			linkDirCopying(t, filepath.Join(repo, e.Name()), filepath.Join(root, e.Name()), files)
			continue
		}
		if err := os.Symlink(filepath.Join(repo, e.Name()), filepath.Join(root, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range modules {
		writeFile(t, filepath.Join(root, "build"), name, string(b))
	}
	return root
}

// rootEmbeds maps each top-level directory the root package's //go:embed
// lines reach into to the names of the files embedded from it
// ("manifests" → "email.toml", …).
func rootEmbeds(t *testing.T, repo string) map[string][]string {
	t.Helper()
	sources, err := filepath.Glob(filepath.Join(repo, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	embedded := map[string][]string{}
	for _, src := range sources {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			patterns, ok := strings.CutPrefix(line, "//go:embed ")
			if !ok {
				continue
			}
			for _, p := range strings.Fields(patterns) {
				if dir, file, ok := strings.Cut(p, "/"); ok {
					embedded[dir] = append(embedded[dir], file)
				}
			}
		}
	}
	return embedded
}

// linkDirCopying makes dst a directory of links to src's entries, except
// the files named, which it copies.
func linkDirCopying(t *testing.T, src, dst string, files []string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(files, e.Name()) {
			if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// topIgnored lists the top-level names repo's .gitignore names with a
// leading slash ("/build/", "/.connhost.witness").
func topIgnored(t *testing.T, repo string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "/"); ok && name != "" {
			names = append(names, strings.TrimSuffix(name, "/"))
		}
	}
	return names
}

// recipePorts are the free ports that stand in for the recipes' fixed
// ones. 12112 is the sandbox's email port, the one after its payments port
// 12111, so the two stay neighbours.
type recipePorts map[string]string

func (p recipePorts) addr(fixed string) string { return p[fixed] }

func freeRecipePorts(t *testing.T) recipePorts {
	t.Helper()
	free := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	pair := 0
	for range 50 {
		p := free()
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1)); err == nil {
			_ = l.Close()
			pair = p
			break
		}
	}
	if pair == 0 {
		t.Fatal("no two neighbouring free ports for the sandbox")
	}
	return recipePorts{
		"127.0.0.1:8420":  fmt.Sprintf("127.0.0.1:%d", free()),
		"127.0.0.1:8421":  fmt.Sprintf("127.0.0.1:%d", free()),
		"127.0.0.1:12111": fmt.Sprintf("127.0.0.1:%d", pair),
		"127.0.0.1:12112": fmt.Sprintf("127.0.0.1:%d", pair+1),
	}
}

func (p recipePorts) replacer() *strings.Replacer {
	var pairs []string
	for fixed, free := range p {
		pairs = append(pairs, fixed, free)
	}
	return strings.NewReplacer(pairs...)
}

// waitHealthy waits until base answers /healthz, failing if p ends first.
func waitHealthy(t *testing.T, base string, p *proc.Process) {
	t.Helper()
	deadline := time.Now().Add(processBound)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p.Exited() {
			t.Fatalf("connhost dev exited before it served:\n%s", p.Stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("connhost dev did not serve %s within %s:\n%s", base, processBound, p.Stderr())
}

// expectation is a "#   → …" comment of a recipe: where it starts
// ("README.md:70"), its script line, and its pieces, one list per line.
type expectation struct {
	at     string
	script int
	lines  [][]string
}

var (
	expectStart = regexp.MustCompile(`^\s*#\s+→ (.*)$`)
	expectMore  = regexp.MustCompile(`^\s*# {5,}(\S.*)$`)
	remark      = regexp.MustCompile(` {3,}\(.*$`)
	lineMarker  = regexp.MustCompile("\n\x1e([0-9]+)\n")
)

// expectationsOf finds the expectations in a script's lines; the script
// line of lines[i] is first+i.
func expectationsOf(lines []recipeLine, first int) []expectation {
	var out []expectation
	open := false
	for i, l := range lines {
		var text string
		if m := expectStart.FindStringSubmatch(l.text); m != nil {
			out = append(out, expectation{at: l.at, script: first + i})
			open, text = true, m[1]
		} else if m := expectMore.FindStringSubmatch(l.text); open && m != nil {
			text = m[1]
		} else {
			open = false
			continue
		}
		text = remark.ReplaceAllString(strings.TrimRight(text, " "), "")
		e := &out[len(out)-1]
		e.lines = append(e.lines, strings.Split(text, "…"))
	}
	return out
}

// runRecipe runs blocks as one bash script in dir, with the fixed ports
// replaced, and checks every expectation against the output of the command
// above it. A DEBUG trap marks each command's output with its line.
func runRecipe(t *testing.T, dir string, ports recipePorts, blocks [][]recipeLine) {
	t.Helper()
	const header = "exec 2>&1\ntrap 'printf \"\\n\\036%d\\n\" \"$LINENO\"' DEBUG\n"
	first := strings.Count(header, "\n") + 1
	var lines []recipeLine
	for _, b := range blocks {
		lines = append(lines, b...)
	}
	var script strings.Builder
	script.WriteString(header)
	for _, l := range lines {
		script.WriteString(l.text + "\n")
	}
	work := t.TempDir()
	path := filepath.Join(work, "recipe.sh")
	if err := os.WriteFile(path, []byte(ports.replacer().Replace(script.String())), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(work, "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(t.Context(), recipeBound)
	defer cancel()
	sh, err := proc.Start(proc.Cmd{Path: "bash", Args: []string{path}, Dir: dir, Env: cliEnv(), Stdout: out, Stderr: out, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	// What the recipe left running (a recipe that fails midway leaves its
	// background processes) shares the script's process group.
	pgid := sh.Pid()
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	res, err := sh.Wait(ctx)
	printed, rerr := os.ReadFile(out.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || res.Code != 0 {
		t.Errorf("the recipe (%s to %s) ended with %v, %v; its last command was %s",
			lines[0].at, lines[len(lines)-1].at, res, err, lastRecipeLine(printed, lines, first))
	}

	// Each command's output, by the script line bash gave in its marker.
	byLine := map[int]string{}
	var marked []int
	parts := lineMarker.Split(string(printed), -1)
	marks := lineMarker.FindAllStringSubmatch(string(printed), -1)
	for i, m := range marks {
		n, _ := strconv.Atoi(m[1])
		if _, seen := byLine[n]; !seen {
			marked = append(marked, n)
		}
		byLine[n] += parts[i+1]
	}
	for _, e := range expectationsOf(lines, first) {
		cmd := 0 // the last command above the expectation that ran
		for _, n := range marked {
			if n < e.script && n > cmd {
				cmd = n
			}
		}
		if cmd == 0 {
			t.Errorf("%s: no command above this output ran", e.at)
			continue
		}
		if msg := matchPieces(byLine[cmd], e.lines); msg != "" {
			t.Errorf("%s: the output of %s (%s) %s; it printed:\n%s",
				e.at, lines[cmd-first].at, strings.TrimSpace(lines[cmd-first].text), msg, byLine[cmd])
		}
	}
}

// lastRecipeLine is where the last command the script ran is written
// ("none" before the first).
func lastRecipeLine(printed []byte, lines []recipeLine, first int) string {
	marks := lineMarker.FindAllStringSubmatch(string(printed), -1)
	if len(marks) == 0 {
		return "none"
	}
	n, _ := strconv.Atoi(marks[len(marks)-1][1])
	if i := n - first; i >= 0 && i < len(lines) {
		return lines[i].at
	}
	return "none"
}

// matchPieces reports how got fails to show want: each line's pieces in
// order, the lines in order, whitespace aside ("" when it shows them).
func matchPieces(got string, want [][]string) string {
	g := squeeze(got)
	at := 0
	for _, line := range want {
		for _, piece := range line {
			p := squeeze(piece)
			i := strings.Index(g[at:], p)
			if i < 0 {
				return fmt.Sprintf("does not show %q (after what it showed of %q)", strings.TrimSpace(piece), strings.Join(line, "…"))
			}
			at += i + len(p)
		}
	}
	return ""
}

// squeeze drops all white space: the docs wrap and indent JSON their own
// way.
func squeeze(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// checkIgnored fails for each entry a recipe wrote at the top of root that
// the repository's .gitignore does not ignore: a reader's checkout must
// stay clean.
func checkIgnored(t *testing.T, repo, root string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git is needed to check what the recipes leave behind: %v", err)
		}
		t.Skipf("git not installed: %v", err)
	}
	if out, err := exec.Command("git", "-C", repo, "rev-parse", "--is-inside-work-tree").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not a git checkout: %v\n%s", repo, err, out)
		}
		t.Skipf("%s is not a git checkout: %s", repo, out)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	embedded := rootEmbeds(t, repo)
	var written []string
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 || e.Name() == "build" {
			continue // the repository's own entries, and the modules put there
		}
		if files, ok := embedded[e.Name()]; ok {
			// recipeRoot's own directory: what is neither a link nor an
			// embedded copy was written by the recipe.
			inner, err := os.ReadDir(filepath.Join(root, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range inner {
				if f.Type()&os.ModeSymlink == 0 && !slices.Contains(files, f.Name()) {
					written = append(written, e.Name()+"/"+dirSlash(f))
				}
			}
			continue
		}
		written = append(written, dirSlash(e))
	}
	for _, name := range written {
		if err := exec.Command("git", "-C", repo, "check-ignore", "-q", name).Run(); err != nil {
			t.Errorf("the recipe leaves %s in the checkout, which .gitignore does not ignore", name)
		}
	}
}

// dirSlash is e's name, with a slash after a directory's.
func dirSlash(e os.DirEntry) string {
	if e.IsDir() {
		return e.Name() + "/"
	}
	return e.Name()
}

// mcpMessage is a ">>" or "<<" message of the MCP session in
// docs/runtimes.md, and where it starts.
type mcpMessage struct {
	at   string
	send bool
	text string // continuation lines joined, their indentation dropped
}

// runMCPSession starts the sandbox and `connhost mcp` with the config
// docs/runtimes.md names, sends every ">>" message as one line and
// compares every "<<" message with the server's next message that has an id.
func runMCPSession(t *testing.T, bin, root string, block []recipeLine) {
	t.Helper()
	var msgs []mcpMessage
	for _, l := range block {
		switch {
		case strings.HasPrefix(l.text, ">> "), strings.HasPrefix(l.text, "<< "):
			msgs = append(msgs, mcpMessage{at: l.at, send: l.text[0] == '>', text: l.text[3:]})
		case strings.TrimSpace(l.text) != "" && len(msgs) > 0 && l.text[0] == ' ':
			msgs[len(msgs)-1].text += strings.TrimSpace(l.text)
		default:
			t.Fatalf("%s: neither a >> or << message nor an indented continuation: %q", l.at, l.text)
		}
	}

	sb, err := sandbox.Start(t.Context(), sandbox.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	cfg := writeFile(t, t.TempDir(), "connhost.toml", fmt.Sprintf(
		"[mcp]\napprover = \"rita\"\n\n[connectors.payments]\napi_key = \"sk_test_readme\"\nbase_url = %q\nallow_http = [%q]\n",
		sb.PaymentsURL(), sb.PaymentsURL()))
	ctx, cancel := context.WithTimeout(t.Context(), recipeBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mcp", "--data", filepath.Join(t.TempDir(), "data"), "--config", cfg)
	cmd.Dir = root
	cmd.Env = cliEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("connhost mcp: %v\n%s", err, stderr.String())
		}
	}()
	replies := make(chan string, 64)
	go func() {
		defer close(replies)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			replies <- sc.Text()
		}
	}()

	for _, m := range msgs {
		if m.send {
			var v any
			if err := json.Unmarshal([]byte(m.text), &v); err != nil {
				t.Fatalf("%s: the message is not JSON: %v\n%s", m.at, err, m.text)
			}
			line, _ := json.Marshal(v)
			if _, err := io.WriteString(stdin, string(line)+"\n"); err != nil {
				t.Fatalf("%s: send: %v\n%s", m.at, err, stderr.String())
			}
			continue
		}
		var got string
		for got == "" {
			select {
			case line, ok := <-replies:
				if !ok {
					t.Fatalf("%s: connhost mcp closed its output; stderr:\n%s", m.at, stderr.String())
				}
				var probe struct {
					ID json.RawMessage `json:"id"`
				}
				if json.Unmarshal([]byte(line), &probe) == nil && probe.ID != nil {
					got = line // notifications (no id) are not in the page
				}
			case <-ctx.Done():
				t.Fatalf("%s: no answer from connhost mcp; stderr:\n%s", m.at, stderr.String())
			}
		}
		if msg := matchPieces(got, [][]string{strings.Split(m.text, "…")}); msg != "" {
			t.Errorf("%s: connhost mcp's message %s; it sent:\n%s", m.at, msg, got)
		}
	}
}
