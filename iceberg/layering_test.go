package iceberg

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering: all table I/O goes through floe's store; this package (and
// the iceberg-go packages it uses) link neither gocloud.dev nor the AWS SDK
// except through floe's store.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		for _, bad := range []string{"gocloud.dev", "github.com/aws/", "github.com/apache/iceberg-go/io/gocloud", "github.com/apache/iceberg-go/catalog"} {
			if strings.HasPrefix(imp, bad) {
				t.Errorf("iceberg imports %s; only floe's store may do storage I/O", imp)
			}
		}
	}
	deps, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(deps)) {
		if strings.HasPrefix(d, "github.com/apache/iceberg-go/io/gocloud") {
			t.Errorf("iceberg links %s (iceberg-go's own cloud I/O)", d)
		}
	}
}
