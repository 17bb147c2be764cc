package triage

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/whypending/whypending/actions"
)

// TestActionKindsAreRepairs keeps every action kind triage offers (its action* constants) one
// of the actions package's Kind values: triage copies them because its rules may not import
// actions (the arrows point the other way), and a button whose kind the bot does not know
// plans nothing.
func TestActionKindsAreRepairs(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(parsed, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "action") || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				kind, _ := strconv.Unquote(lit.Value)
				found++
				if !actions.Kind(kind).Valid() {
					t.Errorf("%s: %s = %q is not an actions.Kind (%v)", f, name.Name, kind, actions.Kinds)
				}
			}
			return true
		})
	}
	if found < 3 {
		t.Errorf("found %d action kinds in triage, want the 3 it offers (release-leaked-ips, release-empty-blocks, unlock-datastore)", found)
	}
}
