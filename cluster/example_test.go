package cluster_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// Example shows one epoch as the engine will run it in each of W worker
// processes (here two goroutines over one store): join the decision,
// exchange rows with the other workers, write a part, commit.
func Example() {
	ctx := context.Background()
	st, _ := store.Open(ctx, "mem://")
	defer st.Close()
	topo := cluster.Topology{Workers: 2, Parallelism: 2, MaxParallelism: 8}
	var wg sync.WaitGroup
	out := make([]string, topo.Workers)
	for i := range topo.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := cluster.New(cluster.Config{Store: st, Pipeline: "clicks", Worker: i, Topology: topo})
			if err != nil {
				out[i] = err.Error()
				return
			}
			// 1. The decision: worker 0 lists and decides, worker 1 follows.
			ep, err := w.Join(ctx, 1, 1, nil, func(context.Context) (*manifest.Decision, error) {
				files := []cluster.File{{Key: "a.jsonl", Size: 100}, {Key: "b.jsonl", Size: 100}}
				return &manifest.Decision{Files: cluster.AssignFiles(files, topo.Workers), Watermark: manifest.NoWatermark}, nil
			})
			if err != nil {
				out[i] = err.Error()
				return
			}
			mine := cluster.FilesOf(ep.Decision, i)
			// 2. One exchange round: a segment per other worker (Arrow IPC in
			// the engine), a summary for all.
			segs := make([][]byte, topo.Workers)
			segs[1-i] = fmt.Appendf(nil, "rows of %s for worker %d", mine[0].Key, 1-i)
			if _, err := ep.Send(ctx, 1, segs, nil); err != nil {
				out[i] = err.Error()
				return
			}
			in, err := ep.Receive(ctx, 1)
			if err != nil {
				out[i] = err.Error()
				return
			}
			// 3. The part record (state files and outputs in the engine).
			if _, err := ep.WritePart(ctx, &manifest.WorkerPart{Counters: manifest.Counters{FilesIn: int64(len(mine))}}); err != nil {
				out[i] = err.Error()
				return
			}
			// 4. The commit: a manifest built from the decision and the parts.
			data, _, err := ep.Commit(ctx, func(d *manifest.Decision, parts []*manifest.WorkerPart) ([]byte, error) {
				m, err := cluster.MergeParts(d, parts)
				if err != nil {
					return nil, err
				}
				return manifest.EncodeManifest(&manifest.Manifest{FormatVersion: manifest.FormatVersion, Pipeline: d.Pipeline,
					Generation: d.Generation, Epoch: d.Epoch, Attempt: d.Attempt, CreatedAt: d.CreatedAt, Watermark: manifest.NoWatermark,
					Counters: m.Counters, Operators: m.Operators, Outputs: m.Outputs, SideOutputs: m.SideOutputs})
			})
			if err != nil {
				out[i] = err.Error()
				return
			}
			m, _ := manifest.DecodeManifest("m", data)
			out[i] = fmt.Sprintf("worker %d decoded %s, received %q, committed epoch %d with %d files in",
				i, mine[0].Key, in[0].Data, m.Epoch, m.Counters.FilesIn)
		}()
	}
	wg.Wait()
	for _, line := range out {
		fmt.Println(line)
	}
	// Output:
	// worker 0 decoded a.jsonl, received "rows of b.jsonl for worker 0", committed epoch 1 with 2 files in
	// worker 1 decoded b.jsonl, received "rows of a.jsonl for worker 1", committed epoch 1 with 2 files in
}
