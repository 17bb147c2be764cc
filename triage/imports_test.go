package triage

import (
	"go/parser"
	"go/token"
	"io/fs"
	pathpkg "path"
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

// TestArrowsPointOneWay keeps docs/DESIGN.md's arrows pointing one way, over the direct
// imports of every non-test file of the module (so the transitive ones follow):
//
//	adapters/* -> chat (and bot only where listed below) ; cmd/whypending -> everything
//	bot -> bot/*, fleet, triage, actions, calico, chat ; fleet -> triage, actions, calico, chat
//	triage, actions, calico -> no chat package (chat, bot, adapters)
//
// Only cmd/whypending and internal/chattest (test support) import bot, besides the listed
// adapter files; only cmd/whypending (and internal/discordfake, for a session pointed at the
// fake) imports an adapter; chat imports no package of the module.
func TestArrowsPointOneWay(t *testing.T) {
	const module = "github.com/whypending/whypending"
	// adapterUsesBot lists the adapter files that may import bot, and why.
	adapterUsesBot := map[string]string{
		"adapters/discord/commands.go": "the /ipam repair subcommands (bot.IPAMRepairs), to know which commands make a plan",
	}
	imports := map[string]map[string][]string{} // package dir -> imported module dir -> files
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "hack" || name == "charts" || name == "docs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		pkg := pathpkg.Dir(rel)
		if imports[pkg] == nil {
			imports[pkg] = map[string][]string{}
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if dep, ok := strings.CutPrefix(p, module+"/"); ok {
				imports[pkg][dep] = append(imports[pkg][dep], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"chat", "bot", "fleet", "triage", "actions", "calico", "adapters/slack", "cmd/whypending"} {
		if imports[want] == nil {
			t.Fatalf("package %s not found: the walk is broken", want)
		}
	}
	under := func(pkg string, roots ...string) bool {
		for _, r := range roots {
			if pkg == r || strings.HasPrefix(pkg, r+"/") {
				return true
			}
		}
		return false
	}
	for pkg, deps := range imports {
		for dep, files := range deps {
			switch {
			case pkg == "cmd/whypending", pkg == "internal/chattest" && under(dep, "bot"),
				pkg == "internal/discordfake" && dep == "adapters/discord":
				// the binary wires everything; the chat end-to-end tests wire a bot; the fake
				// Discord hands tests the adapter's session pointed at it
			case pkg == "chat":
				t.Errorf("chat imports %s (%s): chat is the vocabulary and imports no package of the module", dep, files[0])
			case under(dep, "adapters"):
				t.Errorf("%s imports %s (%s): only cmd/whypending wires adapters", pkg, dep, files[0])
			case dep == "bot" && under(pkg, "adapters"):
				for _, f := range files {
					if adapterUsesBot[f] == "" {
						t.Errorf("%s imports bot: adapters import chat; add the file to adapterUsesBot with the reason if bot is truly needed", f)
					}
				}
			case under(dep, "bot") && under(pkg, "adapters"):
				t.Errorf("%s imports %s (%s): adapters talk to the bot through chat", pkg, dep, files[0])
			case dep == "bot":
				t.Errorf("%s imports bot (%s): nothing below bot imports it", pkg, files[0])
			case under(dep, "bot") && !under(pkg, "bot"):
				t.Errorf("%s imports %s (%s): bot's subpackages are bot's", pkg, dep, files[0])
			case under(pkg, "triage", "actions", "calico") && under(dep, "chat", "bot", "fleet"):
				t.Errorf("%s imports %s (%s): triage, actions and calico know no chat platform", pkg, dep, files[0])
			case under(pkg, "fleet") && under(dep, "bot"):
				t.Errorf("%s imports %s (%s): bot builds its clusters from fleet, not the other way", pkg, dep, files[0])
			}
		}
	}
}
