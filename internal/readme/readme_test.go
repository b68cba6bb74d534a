package readme

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// example is one README example and how the test runs it.
type example struct {
	name string
	// readme holds the example as README.md shows it: a code span
	// (whitespace collapsed, as Markdown shows a span wrapped over two
	// lines) or a fenced sh block exactly. The test fails if one is not in
	// the README.
	readme []string
	// script is bash run in the copy with the installed shoal on PATH.
	// @i@ stands for readme[i] and @i.j@ for line j (from 1) of that
	// block without its comment, inserted as written; the rest starts,
	// waits for and checks it (prelude's helpers). Placeholders the
	// README uses (T for the token file) are filled in by sed-free
	// substitution in the script itself, where noted.
	script string
	// netns: the example binds the README's fixed ports (8080, 9090, …),
	// so it runs in a network namespace of its own (root only).
	netns bool
	// slow examples are skipped under -short.
	slow bool
}

// prelude is bash every script starts with: background starts in their own
// process group (set -m) so they can be stopped whole, waits on log lines
// and a clean stop that fails the script unless every process exits 0.
const prelude = `set -euo pipefail
set -m
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -KILL -- -"$p" 2>/dev/null || true; done' EXIT
wait_for() { # LOG TEXT: until LOG holds TEXT; 5 minutes at most (go run compiles first)
  for _ in $(seq 1500); do grep -qF -- "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done
  echo "no \"$2\" in $1:" >&2; cat "$1" >&2; return 1
}
url_in() { grep -o 'open http[^ ]*' "$1" | head -1 | cut -d' ' -f2; }
status_of() { curl -sS -o /dev/null -w '%{http_code}' "$@"; }
stop_go_run() { # PID of a go run: Ctrl-C reaches the program, which stops; go run then exits with its status
  kill -INT $(pgrep -P "$1"); wait "$1"; PIDS=()
}
stop_all() {
  for p in "${PIDS[@]}"; do kill -INT -- -"$p"; done
  for p in "${PIDS[@]}"; do wait "$p" || { echo "a process stopped with status $?" >&2; return 1; }; done
  PIDS=()
}
`

// up starts the README's `shoal up` command @0@ and waits until it prints
// its address, in URL.
const upStart = `( exec @0@ ) > up.log 2>&1 & PIDS+=($!)
wait_for up.log 'shoal is up: open'
URL=$(url_in up.log)
`

// examples lists every README example that runs. They run in this order,
// in one copy: the install comes first.
var examples = []example{
	{name: "install and version", readme: []string{"go install ./cmd/shoal", "shoal --version"}, script: `
@0@
[ "$(command -v shoal)" = "$HOME/go/bin/shoal" ] || { echo "shoal is not the one go install put in ~/go/bin" >&2; exit 1; }
v=$(@1@)
echo "$v"
case "$v" in *"commit $(git rev-parse HEAD)"*) ;; *) echo "--version does not name the commit $(git rev-parse HEAD)" >&2; exit 1;; esac
`},
	{name: "trace stats", readme: []string{"shoal trace stats testdata/nasa-1995-08-01.log.gz"}, script: `
@0@ | tee stats.txt
grep -Eq '^requests +33996$' stats.txt
`},
	{name: "sim", readme: []string{"shoal sim --trace testdata/nasa-1995-08-01.log.gz --policies wrr,lard,tbccrd --nodes 1,2,4,8 --cache-mb 2 --plot sim.svg"}, script: `
@0@
test -s sim.svg && test -s sim.png
`},
	{name: "print-config", readme: []string{"shoal front --print-config"}, script: `
@0@ > front.toml
grep -q '^listen = ' front.toml
`},
	{name: "two commands: go run up", netns: true, readme: []string{"go run ./cmd/shoal up      # a 4-node cluster with a generated sample site; open the URL it prints\ngo test ./...              # the whole test suite\n"},
		// The block's second line is the suite this test is part of.
		script: `
( exec @0.1@ ) > up.log 2>&1 & PIDS+=($!)
wait_for up.log 'shoal is up: open'
URL=$(url_in up.log)
[ "$(status_of "$URL")" = 200 ]
stop_go_run "${PIDS[0]}"
`},
	{name: "up --vhosts", netns: true, readme: []string{"shoal up --vhosts", "curl -H 'Host: a.localhost' http://127.0.0.1:8080/"}, script: upStart + `
[ "$(status_of "$URL")" = 200 ]
[ "$(@1@ -sS -o /dev/null -w '%{http_code}')" = 200 ]
stop_all
`},
	{name: "node and front", netns: true, readme: []string{
		"shoal node --root ./site --listen 127.0.0.1:9001 --cache-mb 64 --cache gdsf",
		"shoal front --listen 127.0.0.1:8080 --nodes http://127.0.0.1:9001,http://127.0.0.1:9002 --policy lard --admin 127.0.0.1:9090",
	}, script: `
mkdir -p site && echo 'hello from ./site' > site/index.html
( exec @0@ ) > node1.log 2>&1 & PIDS+=($!)
# The front's example names a second node on 9002.
( exec shoal node --root ./site --listen 127.0.0.1:9002 ) > node2.log 2>&1 & PIDS+=($!)
wait_for node1.log 'node serving'
wait_for node2.log 'node serving'
( exec @1@ ) > front.log 2>&1 & PIDS+=($!)
wait_for front.log 'msg=serving'
curl -sSf http://127.0.0.1:8080/ | grep -q 'hello from ./site'
curl -sSf http://127.0.0.1:9090/nodes | grep -q 9002
stop_all
`},
	{name: "bench against the front", netns: true, slow: true, readme: []string{
		"shoal bench http --url http://127.0.0.1:8080/ --connections 64 --duration 10s",
	}, script: `
mkdir -p site && echo 'hello' > site/index.html
( exec shoal node --root ./site --listen 127.0.0.1:9001 ) > node.log 2>&1 & PIDS+=($!)
wait_for node.log 'node serving'
( exec shoal front --listen 127.0.0.1:8080 --nodes http://127.0.0.1:9001 ) > front.log 2>&1 & PIDS+=($!)
wait_for front.log 'msg=serving'
@0@ | tee bench.txt
stop_all
`},
	{name: "up lard", netns: true, readme: []string{"shoal up --nodes 4 --policy lard --cache-mb 2"}, script: upStart + `
[ "$(status_of "$URL")" = 200 ]
stop_all
`},
	{name: "up passfd", netns: true, readme: []string{"shoal up --path passfd"}, script: upStart + `
[ "$(status_of "$URL")" = 200 ]
stop_all
`},
	{name: "up redirect", netns: true, readme: []string{"shoal up --path redirect"}, script: upStart + `
[ "$(status_of "$URL")" = 302 ]
stop_all
`},
	{name: "up replicas", netns: true, readme: []string{"shoal up --replicas 2"}, script: upStart + `
[ "$(status_of "$URL")" = 200 ]
stop_all
`},
	{name: "up tls", netns: true, readme: []string{"shoal up --tls"}, script: upStart + `
case "$URL" in https://*) ;; *) echo "up --tls printed $URL" >&2; exit 1;; esac
[ "$(status_of -k "$URL")" = 200 ]
stop_all
`},
	{name: "publish to up", netns: true, readme: []string{"shoal publish --admin http://127.0.0.1:9090 --admin-token-file T ./site"},
		// T is the README's placeholder for the token file `shoal up` prints.
		script: `
( exec shoal up ) > up.log 2>&1 & PIDS+=($!)
wait_for up.log 'shoal is up: open'
URL=$(url_in up.log)
T=$(grep -o 'admin token in [^ ]*' up.log | cut -d' ' -f4)
mkdir -p site && echo 'published from ./site' > site/index.html
@0@
curl -sSf "$URL" | grep -q 'published from ./site'
stop_all
`},
	{name: "site from trace and replay", netns: true, slow: true, readme: []string{
		"shoal up --site-from-trace testdata/nasa-1995-08-01.log.gz --cache-mb 2",
		"shoal bench http --trace testdata/nasa-1995-08-01.log.gz --url http://127.0.0.1:8080",
	}, script: upStart + `
@1@ | tee bench.txt
stop_all
`},
	{name: "CDN purge", netns: true, readme: []string{"(umask 077; head -c 32 /dev/urandom > seed)              # the CDN's shared secret\n" +
		"mkdir -p site && echo 'hello from the origin' > site/index.html\n" +
		"shoal node --root site --listen 127.0.0.1:9000 &         # the origin: any web server\n" +
		"shoal pop --name paris --seed-file seed --origin http://127.0.0.1:9000 &\n" +
		"curl -s --retry 20 --retry-connrefused http://127.0.0.1:8080/index.html >/dev/null   # a miss: fetched, then kept\n" +
		"curl -H \"Authorization: Bearer $(cat ~/.cache/shoal/admin.token)\" -H 'Content-Type: application/json' \\\n" +
		"     -X POST 'http://127.0.0.1:9090/purge?url=/index.html'\n"},
		script: `
{
@0@
} > purge.out
PIDS+=($(jobs -p))
cat purge.out
grep -q '"confirmed"' purge.out
grep -q '"removed_here": 1' purge.out
# shoal pop's own hint carries the headers the API wants.
grep -q "purge a URL from every PoP" purge.out
grep -q "Authorization: Bearer \$(cat $HOME/.cache/shoal/admin.token)\" -H 'Content-Type: application/json' -X POST" purge.out
stop_all
`},
	{name: "sim cdn", slow: true, readme: []string{"shoal sim cdn --trace testdata/nasa-1995-08-01.log.gz --pops 10,30 --plot cdn.svg"}, script: `
@0@
test -s cdn.svg
`},
	{name: "choosing a policy", slow: true, readme: []string{"go run ./cmd/shoal sim --trace testdata/nasa-1995-08-01.log.gz \\\n" +
		"    --policies wrr,lc,urlhash,chbl,lard,lardr,tbccrd,weblins --nodes 1,2,4,8,16 --cache-mb 2 --plot docs/sim-nasa-2mb.svg\n"},
		script: `
@0@ | tee sim.txt
grep -q 'requests replayed per run' sim.txt
test -s docs/sim-nasa-2mb.svg && test -s docs/sim-nasa-2mb.png
`},
}

// exempt are README examples the test does not run, and why.
var exempt = map[string]string{
	"sudo shoal lab up --nodes 3":                        "builds the root-only namespace lab shared with other tests; internal/up's repair tests build it",
	"sudo shoal lab down --all":                          "removes every lab on the host, other tests' included",
	"sudo shoal up --path repair":                        "the root-only repair lab; TestStartRepair (internal/up) runs it",
	"sudo shoal up --pops 3":                             "the root-only PoP namespaces behind a WAN switch; TestUpPopsIsACDN (cmd/shoal) runs it and follows its curl lines",
	"shoal up --pops 3":                                  "TestUpPopsIsACDN (cmd/shoal) runs it and follows the curl lines it prints",
	"shoal front --vhosts example.com,example.org":       "the flag alone: a front needs --nodes",
	"shoal front --tls-cert site.crt --tls-key site.key": "the flags alone: a certificate of the reader's and --nodes",
	"shoal pop --name paris --seed-file seed --peer 10.0.0.1:7946 --join 10.0.0.2:7946": "addresses of two hosts",
	"curl -k": "curl's flag for `shoal up --tls`, which the tls example uses",
}

// placeholder matches what marks a code span as a fragment of syntax
// rather than a command to run: an upper-case word (NAME, DIR, ADDR,
// COMMAND) or an ellipsis.
var placeholder = regexp.MustCompile(`\b[A-Z]{3,}\b|…`)

// fragment reports whether the span is syntax, not a command: a
// placeholder, or a command's name alone ("shoal up", "shoal sim cdn").
func fragment(span string) bool {
	return placeholder.MatchString(span) || !strings.Contains(span, " -") && len(strings.Fields(span)) <= 3
}

// readmeExamples returns the README's command spans (whitespace collapsed)
// and its fenced sh blocks.
func readmeExamples(t *testing.T, readme string) (spans, blocks []string) {
	t.Helper()
	fence := regexp.MustCompile("(?s)```sh\n(.*?)```")
	for _, m := range fence.FindAllStringSubmatch(readme, -1) {
		blocks = append(blocks, m[1])
	}
	rest := fence.ReplaceAllString(readme, "")
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(rest, -1) {
		s := strings.Join(strings.Fields(m[1]), " ")
		if regexp.MustCompile(`^(sudo )?(shoal|go|curl)( |$)`).MatchString(s) {
			spans = append(spans, s)
		}
	}
	return spans, blocks
}

// TestReadmeCoversItsExamples: every command span and sh block of the
// README is run by TestReadmeExamples, exempted with a reason, or a
// fragment of syntax; and everything the test runs is in the README as
// written. A new example without a way to run it fails here.
func TestReadmeCoversItsExamples(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	spans, blocks := readmeExamples(t, string(b))
	run := map[string]bool{}
	for _, e := range examples {
		for _, r := range e.readme {
			run[r] = true
			if !strings.Contains(r, "\n") && !containsSpan(spans, r) || strings.Contains(r, "\n") && !containsBlock(blocks, r) {
				t.Errorf("%s: README.md does not show %q (as a code span or a sh block)", e.name, r)
			}
		}
	}
	for _, s := range spans {
		if !run[s] && exempt[s] == "" && !fragment(s) {
			t.Errorf("README example %q is neither run by TestReadmeExamples nor exempted: add it to examples", s)
		}
	}
	for _, bl := range blocks {
		if !run[bl] {
			t.Errorf("README sh block is not run by TestReadmeExamples:\n%s", bl)
		}
	}
	for s := range exempt {
		if !containsSpan(spans, s) {
			t.Errorf("exempted %q is no longer in the README: drop it from exempt", s)
		}
	}
}

func containsSpan(spans []string, s string) bool {
	for _, x := range spans {
		if x == s {
			return true
		}
	}
	return false
}

func containsBlock(blocks []string, s string) bool {
	for _, x := range blocks {
		if x == s {
			return true
		}
	}
	return false
}

// expand fills a script's @i@ and @i.j@ with e's README text.
func (e example) expand() string {
	s := e.script
	for i, r := range e.readme {
		for j, line := range strings.Split(strings.TrimRight(r, "\n"), "\n") {
			if k := strings.Index(line, " #"); k >= 0 {
				line = line[:k]
			}
			s = strings.ReplaceAll(s, fmt.Sprintf("@%d.%d@", i, j+1), strings.TrimSpace(line))
		}
		s = strings.ReplaceAll(s, fmt.Sprintf("@%d@", i), strings.TrimRight(r, "\n"))
	}
	if e.name == "publish to up" {
		s = strings.ReplaceAll(s, "--admin-token-file T ", `--admin-token-file "$T" `)
	}
	return prelude + s
}

// TestReadmeExamples copies the repository as git tracks it into a fresh
// folder (nothing from beside the repository, nothing untracked), makes it
// a git repository of its own, and runs the README's examples there with a
// fresh HOME: `go install ./cmd/shoal` first, then each example as
// written (see examples). Those that bind the README's fixed ports run in
// network namespaces of their own, so they need root and are skipped
// without it. Under -short the slow ones are skipped: the 10 s bench, the
// trace replay, `shoal sim cdn` and the full policy comparison.
func TestReadmeExamples(t *testing.T) {
	for _, tool := range []string{"git", "go", "bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	copyDir, home := freshCopy(t), t.TempDir()
	env := envFor(t, home)
	root := os.Geteuid() == 0
	if _, err := exec.LookPath("unshare"); err != nil {
		root = false
	}
	for i, e := range examples {
		ok := t.Run(e.name, func(t *testing.T) {
			switch {
			case e.slow && testing.Short():
				t.Skip("slow; runs without -short")
			case e.netns && !root:
				t.Skip("binds the README's fixed ports: needs root for a network namespace of its own")
			}
			runExample(t, e, copyDir, env, root)
		})
		if i == 0 && !ok {
			t.Fatal("go install failed: the other examples need it")
		}
	}
}

// runExample runs e's script in dir, in a network namespace of its own
// when e binds fixed ports.
func runExample(t *testing.T, e example, dir string, env []string, root bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := []string{"bash", "-c", e.expand()}
	if e.netns {
		args = []string{"unshare", "--net", "bash", "-c", "ip link set lo up && exec bash -c \"$0\"", e.expand()}
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v after %v\n%s", err, time.Since(start).Round(time.Millisecond), out)
	}
	t.Logf("ran in %v", time.Since(start).Round(time.Millisecond))
}

// freshCopy copies the files git tracks in the repository (as they are in
// the working tree) into a new folder, commits them there, and returns it.
func freshCopy(t *testing.T) string {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "shoal")
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(repo, name), filepath.Join(dst, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=readme test", "-c", "user.email=readme@test", "commit", "-q", "-m", "a fresh copy"}} {
		if out, err := exec.Command("git", append([]string{"-C", dst}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dst
}

func copyFile(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, fi.Mode().Perm())
}

// envFor is a new user's environment: a fresh HOME (so ~/go/bin, ~/.cache
// and ~/.cache/shoal start empty) with ~/go/bin on PATH, as the README
// says, and Go's default VCS stamping. The Go build and module caches stay
// the machine's, so nothing is downloaded or rebuilt needlessly.
func envFor(t *testing.T, home string) []string {
	t.Helper()
	goenv := func(k string) string {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME" || k == "PATH" || k == "XDG_CACHE_HOME" || strings.HasPrefix(k, "GO") || strings.HasPrefix(k, "SHOAL"):
		default:
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "PATH="+filepath.Join(home, "go", "bin")+":"+os.Getenv("PATH"),
		"GOPATH="+filepath.Join(home, "go"), "GOCACHE="+goenv("GOCACHE"), "GOMODCACHE="+goenv("GOMODCACHE"),
		"GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=auto", "GOPROXY="+goenv("GOPROXY"), "GONOSUMDB="+goenv("GONOSUMDB"),
		"GOSUMDB="+goenv("GOSUMDB"), "SHOAL_README_TEST="+strconv.Itoa(os.Getpid()))
}
