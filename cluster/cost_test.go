package cluster

import (
	"os"
	"strings"
	"testing"
)

// TestCostTableInDocs keeps docs/workers.md's tables equal to what the cost
// model computes.
func TestCostTableInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/workers.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{1, 2} {
		if table := CostTable(64, r); !strings.Contains(string(doc), table) {
			t.Errorf("docs/workers.md lacks the cost table of %d round(s) the model gives:\n%s", r, table)
		}
	}
}

// TestProtocolFormula: the closed form of the doc comment, and no
// coordination for one worker.
func TestProtocolFormula(t *testing.T) {
	for _, w := range []int{1, 2, 8, 64, 256} {
		for _, r := range []int{0, 1, 3} {
			got := Protocol(Shape{Workers: w, Parallelism: w, Rounds: r})
			W, R := int64(w), int64(r)
			want := Requests{Puts: W*(R+1) + 2, Gets: 2*R*W*(W-1) + 5*W + 3}
			if w == 1 {
				want = Requests{}
			}
			if got != want {
				t.Errorf("W=%d R=%d: %+v, want %+v", w, r, got, want)
			}
		}
	}
}
