package manifest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package pure: metadata, no I/O. It fails when a
// non-test file imports anything outside this list (notably store, os, net,
// gocloud.dev or the AWS SDK). The one floe package allowed is keygroup, a
// leaf of pure functions (the key-group rules) that imports nothing of floe.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"bytes": true, "crypto/sha256": true, "encoding/hex": true, "encoding/json": true,
		"errors": true, "fmt": true, "io": true, "net/url": true, "reflect": true,
		"slices": true, "sort": true, "strconv": true, "strings": true, "time": true, "unicode/utf8": true,
		"github.com/floe-dev/floe/keygroup": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[p] {
				t.Errorf("%s imports %q; package manifest does no I/O and depends only on the standard library and keygroup", f, p)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
