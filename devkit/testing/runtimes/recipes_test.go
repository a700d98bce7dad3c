package runtimes_test

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox"
)

// recipe is one runtime's recipe in clients/js/README.md: the line that
// installs it and the program, each a fenced block after a
// "<!-- recipe: name -->" marker.
type recipe struct {
	name    string
	install string // the sh block: one npm install line
	program string // the js block
}

// recipePreludes define, per recipe, what a recipe leaves to the user:
// the model (scripted here: it asks for one payment of 500 cents under a
// tool-call id of its own, then answers with what the tool said) and the
// conversation's id (RECIPE_SESSION). ESM hoists the recipe's imports, so
// the prelude goes before it as it is.
var recipePreludes = map[string]string{
	"openai-agents": `import { Usage as __Usage } from '@openai/agents';
const conversationId = process.env.RECIPE_SESSION;
const __text = (o) => (typeof o === 'string' ? o : (o?.text ?? JSON.stringify(o)));
const model = {
  async getResponse(request) {
    const done = (Array.isArray(request.input) ? request.input : []).find((i) => i.type === 'function_call_result');
    return { usage: new __Usage(), output: [done
      ? { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'tool said: ' + __text(done.output) }] }
      : { type: 'function_call', callId: 'call_' + conversationId, name: 'payments_create_payment', status: 'completed',
          arguments: JSON.stringify({ amount: 500, currency: 'usd', payment_method: 'pm_card_visa' }) }] };
  },
  async *getStreamedResponse() { throw new Error('not streamed'); },
};
`,
	"langgraph": `import { BaseChatModel as __BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage as __AIMessage, ToolMessage as __ToolMessage } from '@langchain/core/messages';
const threadId = process.env.RECIPE_SESSION;
class __ScriptedChatModel extends __BaseChatModel {
  _llmType() { return 'scripted'; }
  bindTools() { return this; }
  async _generate(messages) {
    const last = messages.at(-1);
    const message = __ToolMessage.isInstance(last)
      ? new __AIMessage('tool said: ' + (typeof last.content === 'string' ? last.content : JSON.stringify(last.content)))
      : new __AIMessage({ content: '', tool_calls: [{ id: 'call_' + threadId, name: 'payments_create_payment', type: 'tool_call',
          args: { amount: 500, currency: 'usd', payment_method: 'pm_card_visa' } }] });
    return { generations: [{ text: typeof message.content === 'string' ? message.content : '', message }] };
  }
}
const chatModel = new __ScriptedChatModel({});
`,
	"ai-sdk": `import { existsSync as __exists, readFileSync as __read, writeFileSync as __write } from 'node:fs';
import { MockLanguageModelV3 as __MockModel } from 'ai/test';
const chatId = process.env.RECIPE_SESSION;
const newMessages = [{ role: 'user', content: 'Pay 5 dollars.' }];
const store = {
  load: async (id) => (__exists(id + '.json') ? JSON.parse(__read(id + '.json', 'utf8')) : []),
  save: async (id, messages) => __write(id + '.json', JSON.stringify(messages)),
};
const __text = (o) => (o?.type === 'text' || o?.type === 'error-text' ? o.value : JSON.stringify(o?.value ?? o));
const __usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
const model = new __MockModel({
  doGenerate: async ({ prompt }) => {
    const done = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content).find((p) => p.type === 'tool-result');
    return done
      ? { content: [{ type: 'text', text: 'tool said: ' + __text(done.output) }], finishReason: { unified: 'stop', raw: 'stop' }, usage: __usage, warnings: [] }
      : { content: [{ type: 'tool-call', toolCallId: 'call_' + chatId, toolName: 'payments_create_payment',
          input: JSON.stringify({ amount: 500, currency: 'usd', payment_method: 'pm_card_visa' }) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: __usage, warnings: [] };
  },
});
`,
	"mastra": `import { LibSQLStore as __LibSQLStore } from '@mastra/libsql';
import { Memory as __Memory } from '@mastra/memory';
const thread = process.env.RECIPE_SESSION;
const resource = 'customer-1';
const instructions = 'Pay what you are asked to.';
const memory = new __Memory({ storage: new __LibSQLStore({ id: 'recipe', url: 'file:mastra.db' }) });
const __text = (o) => (o?.type === 'text' || o?.type === 'error-text' ? o.value : (o?.value?.text ?? JSON.stringify(o?.value ?? o)));
const __usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
const model = {
  specificationVersion: 'v3', provider: 'scripted', modelId: 'scripted', supportedUrls: {},
  async doGenerate({ prompt }) {
    const done = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content).find((p) => p.type === 'tool-result');
    return done
      ? { content: [{ type: 'text', text: 'tool said: ' + __text(done.output) }], finishReason: { unified: 'stop', raw: 'stop' }, usage: __usage, warnings: [] }
      : { content: [{ type: 'tool-call', toolCallId: 'call_' + thread, toolName: 'payments_create_payment',
          input: JSON.stringify({ amount: 500, currency: 'usd', payment_method: 'pm_card_visa' }) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: __usage, warnings: [] };
  },
  async doStream() { throw new Error('not streamed'); },
};
`,
}

// TestRecipesAsPasted: each runtime recipe of clients/js/README.md works
// as a user pastes it. In a new project outside the repository, the
// recipe's npm install line runs verbatim against the package's npm pack
// tarball and the runtimes from the npm registry; connhost.toml is the
// README's (pointed at the Stripe emulator); the program is the recipe's,
// after a prelude with a scripted model; it launches connhost mcp from
// PATH. The program must print the receipt of its one payment, charged
// once at the emulator. The npm cache makes a second run fast (and keeps
// the SQLite checkpointer's compiled addon, which the runtimes' packages
// would otherwise compile on every install where no prebuilt binary can
// be downloaded).
func TestRecipesAsPasted(t *testing.T) {
	node := needNode(t)
	npm := needNPM(t)
	config, recipes := readRecipes(t, filepath.Join(shared.jsDir, "README.md"))
	if len(recipes) == 0 {
		t.Fatal("clients/js/README.md has no recipes")
	}
	tgz := npmPack(t, npm)
	primePrebuild(t, node, filepath.Join(shared.jsDir, "node_modules", "better-sqlite3"))
	stripe := shared.sb.PaymentsURL()
	u, _ := url.Parse(stripe)
	emulator := fmt.Sprintf("base_url = %q\nallow_http = [%q]\n", stripe, u.Scheme+"://"+u.Host)
	if !strings.HasSuffix(strings.TrimSpace(config), `api_key_env = "STRIPE_SECRET_KEY"`) {
		t.Fatalf("the README's connhost.toml no longer ends in [connectors.payments]' api_key_env, where the test adds the emulator's URL:\n%s", config)
	}
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			prelude, ok := recipePreludes[r.name]
			if !ok {
				t.Fatalf("recipe %s has no prelude in recipes_test.go (its model and conversation id)", r.name)
			}
			dir := t.TempDir()
			if strings.HasPrefix(dir, shared.root+string(filepath.Separator)) {
				t.Fatalf("the project %s is inside the repository", dir)
			}
			env := append(os.Environ(),
				"PATH="+filepath.Dir(shared.bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
				"npm_config_prefer_offline=true", "npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false")
			run := func(timeout time.Duration, name string, args ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				cmd := exec.CommandContext(ctx, name, args...)
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
				}
				return string(out)
			}
			run(time.Minute, npm, "init", "-y")
			copyFile(t, tgz, filepath.Join(dir, filepath.Base(tgz)))
			if !strings.HasPrefix(r.install, "npm install ./"+filepath.Base(tgz)+" ") {
				t.Fatalf("recipe %s installs with %q, want npm install ./%s and the runtime's packages", r.name, r.install, filepath.Base(tgz))
			}
			start := time.Now()
			run(20*time.Minute, "sh", "-c", r.install)
			t.Logf("%s: %s (%s)", r.name, r.install, time.Since(start).Round(time.Second))
			primePrebuild(t, node, filepath.Join(dir, "node_modules", "better-sqlite3"))

			writeFile(t, filepath.Join(dir, "connhost.toml"), strings.TrimRight(config, "\n")+"\n"+emulator)
			copyFile(t, filepath.Join(shared.ungated, "payments.toml"), filepath.Join(dir, "manifests", "payments.toml"))
			copyFile(t, filepath.Join(shared.modules, "payments.wasm"), filepath.Join(dir, "build", "payments.wasm"))
			writeFile(t, filepath.Join(dir, "agent.mjs"), prelude+"\n"+r.program)

			before := charges()
			env = append(env, "STRIPE_SECRET_KEY="+sandbox.DefaultAPIKey, "RECIPE_SESSION=recipe-"+r.name+"-"+fmt.Sprint(time.Now().UnixNano()))
			out := run(5*time.Minute, node, "agent.mjs")
			m := receiptRE.FindStringSubmatch(out)
			if m == nil || !strings.Contains(out, "tool said: Succeeded") {
				t.Fatalf("the recipe printed %q, want the model's answer with the payment's receipt", out)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1", got)
			}
			t.Logf("%s as pasted: receipt %s, 1 charge", r.name, m[1])
		})
	}
}

// readRecipes reads the "<!-- recipe: name -->" markers of a README: the
// fenced block after "config" is connhost.toml; after any other name, an
// sh block (its install line) and a js block (its program).
func readRecipes(t *testing.T, path string) (config string, recipes []recipe) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string // the fenced blocks after the current marker
	var name string
	var cur *strings.Builder
	flush := func() {
		switch {
		case name == "":
		case name == "config":
			if len(blocks) < 1 {
				t.Fatalf("%s: the config recipe has no block", path)
			}
			config = blocks[0]
		default:
			if len(blocks) < 2 {
				t.Fatalf("%s: recipe %s needs an sh block and a js block, has %d blocks", path, name, len(blocks))
			}
			recipes = append(recipes, recipe{name: name, install: strings.TrimSpace(blocks[0]), program: blocks[1]})
		}
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		case strings.HasPrefix(line, "<!-- recipe: "):
			flush()
			name, blocks = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- recipe: "), " -->"), nil
		case strings.HasPrefix(line, "```") && name != "" && len(blocks) < 2:
			cur = &strings.Builder{}
		case strings.HasPrefix(line, "## "):
			flush()
			name, blocks = "", nil
		}
	}
	flush()
	return config, recipes
}

// needNPM returns npm, failing under CI without it.
func needNPM(t *testing.T) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npm is not installed (Debian package npm); .ci/run installs it")
		}
		t.Skip("npm is not installed (Debian package npm); .ci/run installs it, so this test runs in CI")
	}
	return npm
}

// npmPack packs clients/js as npm publishes it and returns the tarball.
func npmPack(t *testing.T, npm string) string {
	t.Helper()
	dest := t.TempDir()
	cmd := exec.Command(npm, "pack", "--pack-destination", dest)
	cmd.Dir = shared.jsDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm pack in clients/js: %v\n%s", err, out)
	}
	tgz, _ := filepath.Glob(filepath.Join(dest, "*.tgz"))
	if len(tgz) != 1 {
		t.Fatalf("npm pack made %q, want one tarball", tgz)
	}
	return tgz[0]
}

// primePrebuild puts the addon that the better-sqlite3 package in pkgDir
// compiled into the npm cache, where its install step (prebuild-install)
// looks for a downloaded prebuilt binary before it downloads one or
// compiles: the next install of the same version on this Node is as fast
// as a download. Nothing happens when pkgDir holds no compiled addon or
// the cache has it.
func primePrebuild(t *testing.T, node, pkgDir string) {
	t.Helper()
	addon := filepath.Join(pkgDir, "build", "Release", "better_sqlite3.node")
	data, err := os.ReadFile(addon)
	if err != nil {
		return
	}
	// prebuild-install's own names: the release URL for this package,
	// version, Node ABI and platform, and its place in the npm cache.
	const where = `const path = require('path');
const r = (m) => require(require.resolve(m, { paths: [process.cwd()] }));
const pkg = require(path.join(process.cwd(), 'package.json'));
const rc = r('prebuild-install/rc')(pkg);
const util = r('prebuild-install/util');
process.stdout.write(util.cachedPrebuild(util.getDownloadUrl({ ...rc, pkg })));`
	cmd := exec.Command(node, "-e", where)
	cmd.Dir = pkgDir
	out, err := cmd.Output()
	if err != nil {
		t.Logf("no prebuild cache entry for %s: %v", pkgDir, err)
		return
	}
	dst := string(out)
	if _, err := os.Stat(dst); err == nil || !filepath.IsAbs(dst) {
		return
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".prebuild-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmp.Name())
	zw := gzip.NewWriter(tmp)
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{Name: "build/Release/better_sqlite3.node", Mode: 0o755, Size: int64(len(data)), ModTime: time.Now(), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		t.Fatal(err)
	}
	t.Logf("cached the compiled better-sqlite3 addon as its prebuilt binary: %s", dst)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(b))
}
