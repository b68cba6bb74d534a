package cdnsim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The rules of seed 003's content tier — which copies are kept and pushed,
// where a copy is registered and when again, what a home lists, where a
// miss is fetched from and where a client is redirected — live in
// internal/cdn/replica, written once. These tests read the simulator's and
// the live PoPs' sources and fail if either holds a copy of its own: a
// directory written outside replica.Home's rules, or a rule's constant
// read outside replica. They also check that both call the rules, so that
// a rule dropped from one place (and written there by hand) is caught.

// ruleFields are the replica.Config constants only the rules read.
var ruleFields = []string{"DirTTL", "ShieldStretch", "MinRequests", "HotTop", "HotMin", "NearerOrigin"}

// dirWrites are chord.Directory's writes, which only replica.Home makes.
var dirWrites = []string{"Add", "Remove", "Put", "DropHolder"}

// sharedRules are the replica calls both the simulator and the live PoPs
// make: the decisions of seed 003 §1 and §3.1.
var sharedRules = []string{"Plan", "Better", "Roll", "Hold", "RegDue", "At", "Forget", "Apply", "Lost", "NewHome", "NewTable"}

type scan struct {
	calls    map[string]bool // selector names called
	problems []string
}

// scanDir parses the non-test Go files of dir and reports where they write
// a directory or read a rule's constant.
func scanDir(t *testing.T, dir string) scan {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources in %s: %v", dir, err)
	}
	sc := scan{calls: map[string]bool{}}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		sc.check(fset, file)
	}
	return sc
}

func (sc *scan) check(fset *token.FileSet, file *ast.File) {
	ast.Inspect(file, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			fun := x.Fun
			if ix, ok := fun.(*ast.IndexExpr); ok { // a generic call: replica.NewTable[K](...)
				fun = ix.X
			}
			sel, ok := fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			sc.calls[sel.Sel.Name] = true
			if recv, ok := sel.X.(*ast.SelectorExpr); ok && recv.Sel.Name == "dir" && slices.Contains(dirWrites, sel.Sel.Name) {
				sc.problems = append(sc.problems, fset.Position(x.Pos()).String()+": writes a directory outside replica.Home: dir."+sel.Sel.Name)
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "chord" && sel.Sel.Name == "NewDirectory" {
				sc.problems = append(sc.problems, fset.Position(x.Pos()).String()+": a directory outside replica.Home (chord.NewDirectory)")
			}
		case *ast.SelectorExpr:
			if slices.Contains(ruleFields, x.Sel.Name) {
				sc.problems = append(sc.problems, fset.Position(x.Pos()).String()+": reads the rule constant "+x.Sel.Name+" outside replica")
			}
		}
		return true
	})
}

func TestNoSecondCopyOfTheRules(t *testing.T) {
	for _, dir := range []string{".", filepath.Join("..", "pop")} {
		sc := scanDir(t, dir)
		for _, p := range sc.problems {
			t.Errorf("%s", p)
		}
		var missing []string
		for _, r := range sharedRules {
			if !sc.calls[r] {
				missing = append(missing, r)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s never calls replica's %v: is a rule written there by hand?", dir, missing)
		}
	}
}

// The scan finds what it looks for: a directory written by hand and a
// rule's constant read outside replica (the simulator's code before the
// rules moved to replica.Home).
func TestRuleScanFindsACopy(t *testing.T) {
	src := `package x
func (s *sim) send(h int, k string) {
	s.pops[h].dir.Add(s.now, key(k), "1", s.cfg.CDN.DirTTL)
	s.pops[h].dir.Remove(key(k), "1")
	d := chord.NewDirectory(1, 1)
	_ = d
}`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc := scan{calls: map[string]bool{}}
	sc.check(fset, file)
	if len(sc.problems) != 4 {
		t.Fatalf("found %d problems, want 4 (Add, Remove, NewDirectory, DirTTL): %v", len(sc.problems), sc.problems)
	}
}
