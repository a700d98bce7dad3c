package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromiumBin returns the headless browser the console test drives. It
// skips the test when none is installed, unless CI is set (.ci/run
// installs Debian's chromium): there a missing browser fails.
func chromiumBin(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium binary on PATH, and CI is set: .ci/run installs Debian's chromium for this test")
	}
	t.Skip("SKIP: no chromium binary on PATH (apt-get install -y chromium); the console was not tested in a browser")
	return ""
}

// artifactsDir is where the browser test's screenshots go: a directory
// named for the test under $CONNHOST_ARTIFACTS (kept by .ci/run), else the
// test's temporary directory.
func artifactsDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("CONNHOST_ARTIFACTS")
	if base == "" {
		return t.TempDir()
	}
	dir := filepath.Join(base, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browserOptions shape what a browser test shows when a step fails and
// what its screenshots are called.
type browserOptions struct {
	// ServerLog, if set, returns the server's log, shown after the page
	// when a step fails.
	ServerLog func() string
	// PageLimit caps how much of the page's HTML a failure shows; 0 shows
	// it whole.
	PageLimit int
	// ShotPrefix begins each screenshot's file name:
	// <prefix>-<name>-<width>.png.
	ShotPrefix string
	// ShotHeight, if set, cuts each screenshot to the viewport's width
	// and at most this many px of the page (a page of 50 cards is some
	// 40,000 px long at 390 px); unset, a screenshot holds the whole page,
	// as wide and as long as it lays out.
	ShotHeight float64
	// CheckShots has each shot also check that the screenshot is a PNG
	// of the viewport's width and that the page does not scroll sideways
	// at that width.
	CheckShots bool
}

// browser is one headless Chromium a test drives. Its methods fail the
// test, showing the page's HTML, when a step fails.
type browser struct {
	t    *testing.T
	ctx  context.Context
	opts browserOptions
	// axe is axe-core's source, nil when it is not installed (and CI is
	// not set); checked counts the pages it checked.
	axe     []byte
	checked int
	// shots is the screenshots' directory, chosen on the first shot;
	// saved the files written there.
	shots string
	saved []string
}

// newBrowser starts headless Chromium with a profile of its own; the
// test's cleanup stops it. It skips the test when no browser is
// installed (fails under CI=true), and reads axe-core from
// testdata/axe (failing under CI=true when it is not installed).
func newBrowser(t *testing.T, opts browserOptions) *browser {
	t.Helper()
	chrome := chromiumBin(t)
	profile := t.TempDir()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(profile))...)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(bctx); err != nil { // starts the browser under bctx, not a step's timeout
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{t: t, ctx: bctx, opts: opts}
	// axe-core (testdata/axe, installed by npm ci) checks console pages:
	// no serious or critical violation.
	axe, err := os.ReadFile(filepath.Join("testdata", "axe", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core is not installed (.ci/run runs npm ci in cmd/connhost/testdata/axe): %v", err)
		}
		t.Logf("SKIP the accessibility checks: axe-core is not installed (cd cmd/connhost/testdata/axe && npm ci): %v", err)
	}
	b.axe = axe
	return b
}

// fail ends the test with what failed, the page's HTML and the server's
// log.
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if b.opts.PageLimit > 0 && len(html) > b.opts.PageLimit {
		html = html[:b.opts.PageLimit] + "…"
	}
	msg := fmt.Sprintf("%s: %v\npage:\n%s", what, err, html)
	if b.opts.ServerLog != nil {
		msg += "\nserver log:\n" + b.opts.ServerLog()
	}
	b.t.Fatal(msg)
}

// run does steps, all of them within 30 s.
func (b *browser) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		b.fail(what, err)
	}
}

// text is the visible text of the element sel selects, once it is there.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.fail("read "+sel, err)
	}
	return s
}

// eval is the string the JavaScript expr evaluates to on the page.
func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.fail("evaluate "+expr, err)
	}
	return s
}

// accessible has axe-core check the page, what names it in the failure:
// a serious or critical violation fails the test. Without axe-core
// (outside CI) it checks nothing.
func (b *browser) accessible(what string) {
	b.t.Helper()
	if b.axe == nil {
		return
	}
	b.eval(string(b.axe) + `; "loaded"`)
	found, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`axe.run(document).then(r => JSON.stringify(r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fail("axe on "+what, err)
	}
	b.checked++
	if found != "[]" {
		b.t.Errorf("axe-core: serious or critical violations on %s: %s", what, found)
	}
}

// shotsDir is where the screenshots go (see artifactsDir).
func (b *browser) shotsDir() string {
	b.t.Helper()
	if b.shots == "" {
		b.shots = artifactsDir(b.t)
	}
	return b.shots
}

// shot saves the page at 1,280 and at 390 px (cut to ShotHeight); with
// CheckShots it checks each is a PNG of that width, and that the page
// does not scroll sideways at that width. It leaves the viewport at
// 1,280 px.
func (b *browser) shot(name string) {
	b.t.Helper()
	dir := b.shotsDir()
	for _, vp := range []struct {
		w, h   int64
		mobile bool
	}{{1280, 900, false}, {390, 844, true}} {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if vp.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		b.run("viewport for "+name, chromedp.EmulateViewport(vp.w, vp.h, opts...))
		if b.opts.CheckShots {
			if o := b.eval(`document.documentElement.scrollWidth > window.innerWidth ? document.documentElement.scrollWidth + " px wide in " + window.innerWidth : ""`); o != "" {
				b.t.Errorf("the %s page scrolls sideways at %d px: %s", name, vp.w, o)
			}
		}
		var clip *page.Viewport
		if b.opts.ShotHeight > 0 {
			var height float64
			if _, err := fmt.Sscan(b.eval(`String(document.documentElement.scrollHeight)`), &height); err != nil {
				b.t.Fatal(err)
			}
			clip = &page.Viewport{X: 0, Y: 0, Width: float64(vp.w), Height: min(height, b.opts.ShotHeight), Scale: 1}
		}
		img, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) ([]byte, error) {
			yes := true
			r, err := cdp.Call(ctx, tg, page.CaptureScreenshot, page.CaptureScreenshotParams{
				Format: page.CaptureScreenshotFormatPng, CaptureBeyondViewport: &yes, FromSurface: &yes, Clip: clip})
			if err != nil {
				return nil, err
			}
			return r.Data, nil
		})
		if err != nil {
			b.fail("screenshot of "+name, err)
		}
		if b.opts.CheckShots {
			cfg, err := png.DecodeConfig(bytes.NewReader(img))
			if err != nil || int64(cfg.Width) != vp.w || cfg.Height == 0 {
				b.t.Errorf("the %s screenshot at %d px: %dx%d %v", name, vp.w, cfg.Width, cfg.Height, err)
			}
		}
		file := fmt.Sprintf("%s-%s-%d.png", b.opts.ShotPrefix, name, vp.w)
		if err := os.WriteFile(filepath.Join(dir, file), img, 0o644); err != nil {
			b.t.Fatal(err)
		}
		b.saved = append(b.saved, file)
	}
	b.run("viewport back", chromedp.EmulateViewport(1280, 900, chromedp.EmulateScale(1)))
}
