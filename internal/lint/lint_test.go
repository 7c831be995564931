// Package lint holds tests that keep floe's layering honest:
// cmd -> engine -> epoch -> {operators, manifest, store}; only store touches
// gocloud.dev or the AWS SDK.
package lint

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/floe-dev/floe/"

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// forbidden[pkg] lists import prefixes pkg must not use.
	forbidden := map[string][]string{
		"manifest":  {mod, "gocloud.dev", "github.com/aws/"},
		"operators": {mod + "store", mod + "manifest", mod + "epoch", mod + "engine", "gocloud.dev", "github.com/aws/"},
		"expr":      {mod, "gocloud.dev", "github.com/aws/"},
		"formats":   {mod, "gocloud.dev", "github.com/aws/"},
		"spec":      {mod + "store", mod + "epoch", mod + "engine", "gocloud.dev", "github.com/aws/"},
		"epoch":     {mod + "engine", mod + "cmd", "gocloud.dev", "github.com/aws/"},
		"engine":    {mod + "cmd", "gocloud.dev", "github.com/aws/"},
		"cmd/floe":  {"gocloud.dev", "github.com/aws/", mod + "store", mod + "epoch"},
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		rules, ok := forbidden[pkg]
		if !ok {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			for _, bad := range rules {
				if strings.HasPrefix(imp, bad) {
					t.Errorf("%s imports %s; the layering forbids %s*", pkg, imp, bad)
				}
			}
		}
	}
	if checked != len(forbidden) {
		t.Fatalf("checked %d of %d packages; a package moved?", checked, len(forbidden))
	}
}
