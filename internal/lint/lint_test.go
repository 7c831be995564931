// Package lint holds tests that keep floe's layering honest:
// cmd -> engine -> epoch -> {operators, manifest, store}; only store touches
// gocloud.dev or the AWS SDK. The leaves that hold one rule each (keygroup:
// the key-group rules; internal/suggest: the edit distance;
// internal/aggsyntax: the aggregate grammar) import nothing of floe but each
// other as listed, so any package may use them.
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
		"keygroup":           {mod, "gocloud.dev", "github.com/aws/", "github.com/apache/arrow"},
		"internal/suggest":   {mod, "gocloud.dev", "github.com/aws/"},
		"internal/aggsyntax": {mod, "gocloud.dev", "github.com/aws/"},
		"manifest":           {mod, "gocloud.dev", "github.com/aws/"},
		"operators":          {mod + "store", mod + "manifest", mod + "epoch", mod + "engine", "gocloud.dev", "github.com/aws/"},
		"expr":               {mod, "gocloud.dev", "github.com/aws/"},
		"formats":            {mod, "gocloud.dev", "github.com/aws/"},
		"spec":               {mod + "store", mod + "epoch", mod + "engine", "gocloud.dev", "github.com/aws/"},
		"epoch":              {mod + "engine", mod + "cmd", "gocloud.dev", "github.com/aws/"},
		"engine":             {mod + "cmd", "gocloud.dev", "github.com/aws/"},
		// The runner executes plans and knows nothing of the tools above it;
		// the plan compiler reads and writes no storage and runs nothing.
		"engine/internal/runner":   {mod + "engine", mod + "cmd", "gocloud.dev", "github.com/aws/"},
		"engine/internal/dataflow": {mod + "engine", mod + "epoch", mod + "cmd", "gocloud.dev", "github.com/aws/"},
		"engine/internal/decide":   {mod + "engine", mod + "epoch", mod + "cmd", "gocloud.dev", "github.com/aws/"},
		"engine/internal/owner":    {mod + "engine", mod + "cmd", "gocloud.dev", "github.com/aws/"},
		// The sinks' formats and routing run no epoch and know no runner.
		"engine/internal/sinks": {mod + "engine", mod + "epoch", mod + "cmd", "gocloud.dev", "github.com/aws/"},
		// The exchange's wire format knows Arrow and nothing of floe's own.
		"engine/internal/exchange": {mod, "gocloud.dev", "github.com/aws/"},
		// The sources' listing and decoding run no epoch and know no runner.
		"engine/internal/sources": {mod + "engine", mod + "cmd", "gocloud.dev", "github.com/aws/"},
		"cmd/floe":                {"gocloud.dev", "github.com/aws/", mod + "store", mod + "epoch"},
		// The Kafka client knows no spec, manifest or engine: the engine
		// maps the spec onto it and records its offsets.
		"kafka": {mod + "engine", mod + "epoch", mod + "cmd", mod + "spec", mod + "manifest", "gocloud.dev", "github.com/aws/"},
	}
	// allowed[pkg] lists floe leaves pkg may import despite a rule above.
	allowed := map[string]map[string]bool{
		"engine/internal/owner": {mod + "engine/internal/dataflow": true},
		"manifest":              {mod + "keygroup": true},
		"expr":                  {mod + "internal/suggest": true},
		"internal/aggsyntax":    {mod + "internal/suggest": true},
		"engine/internal/runner": {mod + "engine/internal/dataflow": true, mod + "engine/internal/decide": true, mod + "engine/internal/owner": true,
			mod + "engine/internal/sinks": true, mod + "engine/internal/sources": true, mod + "engine/internal/exchange": true},
		"engine/internal/sinks": {mod + "engine/internal/dataflow": true, mod + "engine/internal/owner": true},
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
			if allowed[pkg][imp] {
				continue
			}
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
