package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestWorkersCombiner: two workers of a window of count and integer sum
// send the rows of each other's subtasks as partial aggregates (the debug
// log says how many), and commit exactly one process's windows and late
// rows (late rows are judged before combining and sent as rows).
func TestWorkersCombiner(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx := context.Background()
	root := t.TempDir()
	fu := func(p string) string { return "file://" + filepath.ToSlash(filepath.Join(root, p)) }
	newLanding(t).land(t, ctx, fu("events"), 40)
	ref := workerSpec(t, root, "ref", fu("events"), fu("ref/state"), fu("ref/out"))
	runFloe(t, "run", ref, "--drain")
	w := workerSpec(t, root, "w", fu("events"), fu("w/state"), fu("w/out"))
	procs := []*workerProc{
		startPeer(t, w, 2, 0, "--drain", "--verbose"),
		startPeer(t, w, 2, 1, "--drain", "--verbose"),
	}
	partials := 0
	re := regexp.MustCompile(`"msg":"exchange: rows for other workers sent as partial aggregates".*?"partials":(\d+)`)
	for i, p := range procs {
		if err := <-p.done; err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, tailString(p.stderr.String(), 3000))
		}
		for _, m := range re.FindAllStringSubmatch(p.stderr.String(), -1) {
			n, _ := strconv.Atoi(m[1])
			partials += n
		}
	}
	if partials == 0 {
		t.Fatal("no partial aggregate crossed the exchange")
	}
	want, _ := committedRows(t, ctx, ref, fu("ref/out"))
	got, _ := committedRows(t, ctx, w, fu("w/out"))
	sameRows(t, "two workers", got, want)
	wantLate, _ := sideRows(t, ctx, fu("ref/out"))
	gotLate, _ := sideRows(t, ctx, fu("w/out"))
	if len(wantLate) == 0 {
		t.Fatal("the data has no late rows")
	}
	sameRows(t, "two workers' late rows", gotLate, wantLate)
	t.Logf("%d windows, %d late rows, %d partials sent", len(got), len(gotLate), partials)
}
