package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/internal/datagen"
)

// TestWorkersMatchOneProcess: the issue-27 benchmark's pipeline (the
// tumbling case, 4 files an epoch, drained) run by 2 workers at
// parallelism 2 commits the same rows as one process and as DuckDB, and
// its manifests account for at least the cost model's requests of the
// coordination on top of one process' work.
func TestWorkersMatchOneProcess(t *testing.T) {
	ctx := context.Background()
	hist, _ := smallParquet(t, 300)
	job := func() FloeJob {
		dir := t.TempDir()
		j := FloeJob{Source: filepath.Join(dir, "src"), Format: datagen.Parquet, Sink: filepath.Join(dir, "out"),
			State: filepath.Join(dir, "state"), Parallelism: 2, Drain: true, MaxFilesPerEpoch: 4, RetainEpochs: 1000}
		if err := LinkFiles(j.Source, hist...); err != nil {
			t.Fatal(err)
		}
		return j
	}

	one := job()
	model1, err := ModelRequests(ctx, one, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RunFloe(ctx, one); err != nil {
		t.Fatal(err)
	}
	two := job()
	model2, err := ModelRequests(ctx, two, 2)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunWorkers(ctx, two, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		// Each worker reports the pipeline's counters of the epochs it
		// took part in (the manifests'), not its own share.
		if r.Rows != 30000 || r.Epochs != 4 {
			t.Errorf("worker %d: %d rows in %d epochs, want 30000 in 4 (3 of 4 files and the drain)", i, r.Rows, r.Epochs)
		}
	}

	outOne, err := CommittedOutputs(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	outTwo, err := CommittedOutputs(ctx, two)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := CompareOutputs(ctx, CaseTumbling, outTwo, outOne)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal() || cmp.Floe.Clicks != 30000 {
		t.Fatalf("2 workers against one process: %+v", cmp)
	}
	if dc := duckCompare(t, CaseTumbling, outTwo, hist); !dc.Equal() {
		t.Fatalf("2 workers against DuckDB: %+v", dc)
	}

	// Requests (the manifests' stats, which leave out the decision and the
	// commit): one process reads at least its input files; the workers'
	// parts add at least the protocol's round and part PUTs, W(R+1), and
	// its round GETs, 2RW(W-1), to that.
	n1, req1, err := ManifestRequests(one.State, "clickstream")
	if err != nil {
		t.Fatal(err)
	}
	n2, req2, err := ManifestRequests(two.State, "clickstream")
	if err != nil {
		t.Fatal(err)
	}
	if n1 != 3 || n2 != 3 {
		t.Fatalf("epochs with files: one process %d, 2 workers %d, want 3 each (12 files, 4 an epoch)", n1, n2)
	}
	if model2.Files != 4 || model2.Rounds != 1 || model1.Protocol != (cluster.Requests{}) || model1.Work != model2.Work {
		t.Fatalf("model: one process %+v, 2 workers %+v", model1, model2)
	}
	w, r := int64(2), int64(model2.Rounds)
	if req1.Gets < int64(n1*model1.Files) {
		t.Errorf("one process: %d GETs over %d epochs, want at least its %d input files", req1.Gets, n1, n1*model1.Files)
	}
	if want := int64(n2) * w * (r + 1); req2.Puts < want {
		t.Errorf("2 workers: %d PUTs over %d epochs, want at least %d (rounds and parts)", req2.Puts, n2, want)
	}
	if want := int64(n2) * (2*r*w*(w-1) + int64(model2.Files)); req2.Gets < want {
		t.Errorf("2 workers: %d GETs over %d epochs, want at least %d (rounds and input files)", req2.Gets, n2, want)
	}
	t.Logf("over %d epochs: one process %+v (model work %+v an epoch); 2 workers %+v (model protocol %+v + work %+v an epoch)",
		n1, req1, model1.Work, req2, model2.Protocol, model2.Work)
}
