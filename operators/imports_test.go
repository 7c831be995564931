package operators

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsStayPure keeps the layering honest: operators is computation
// only and must not reach for storage or the network.
func TestImportsStayPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	banned := []string{"github.com/floe-dev/floe/store", "github.com/floe-dev/floe/manifest", "github.com/floe-dev/floe/epoch",
		"github.com/floe-dev/floe/engine", "gocloud.dev", "github.com/aws/", "net/http", "os/exec"}
	for _, f := range files {
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, b := range banned {
				if strings.HasPrefix(path, b) {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
