package triage

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// TestCodesDocumented keeps docs/triage-codes.md and the Code constants in step: every slug in
// the docs' tables has a constant, and every constant is documented.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/triage-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile(`(?m)^\| ([a-z0-9 /-]+) \|`)
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		for _, slug := range regexp.MustCompile(`[a-z0-9-]+`).FindAllString(m[1], -1) {
			if slug != "code" {
				documented[slug] = true
			}
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var constants []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Code" {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				slug, _ := strconv.Unquote(lit.Value)
				constants = append(constants, slug)
			}
		}
		return true
	})
	for _, c := range constants {
		if !documented[c] {
			t.Errorf("code %s has a constant but no row in docs/triage-codes.md", c)
		}
	}
	for d := range documented {
		if !slices.Contains(constants, d) {
			t.Errorf("docs/triage-codes.md documents %s, which has no Code constant", d)
		}
	}
}
