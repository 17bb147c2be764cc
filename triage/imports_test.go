package triage

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRulesDoNoIO keeps the rules pure: no non-test file of package triage may import a client
// of the API server or of the network. Reads belong in package triage/collect.
func TestRulesDoNoIO(t *testing.T) {
	forbidden := []string{"k8s.io/client-go", "net/http", "net", "os", "os/exec", "sigs.k8s.io/controller-runtime", "github.com/whypending/whypending/calico"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") && bad != "net" && bad != "os" {
					t.Errorf("%s imports %s: rules must not do I/O; read it in triage/collect into the Snapshot", f, path)
				}
			}
		}
	}
}
