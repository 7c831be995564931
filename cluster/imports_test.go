package cluster

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package a layer of its own: it imports store,
// manifest and keygroup of floe and the standard library, nothing else
// (no engine, no gocloud or AWS SDK: only store talks to storage).
func TestImports(t *testing.T) {
	floe := map[string]bool{
		"github.com/floe-dev/floe/store": true, "github.com/floe-dev/floe/manifest": true, "github.com/floe-dev/floe/keygroup": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if std := !strings.Contains(strings.SplitN(p, "/", 2)[0], "."); !std && !floe[p] {
				t.Errorf("%s imports %s: package cluster may import only store, manifest, keygroup and the standard library", f, p)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
