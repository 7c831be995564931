package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/engine"
)

// The issue-27 benchmark (cmd/floe-workers): one pipeline run by one
// process or by W worker processes through the state store.

// RunWorkers runs j as workers 0..w-1 of w in this process, one goroutine
// each (the command runs them as processes instead), and returns their
// results in worker order.
func RunWorkers(ctx context.Context, j FloeJob, w int) ([]*FloeResult, error) {
	if w < 2 {
		return nil, fmt.Errorf("run workers: need at least 2 workers, got %d", w)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make([]*FloeResult, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wj := j
			wj.Workers, wj.Worker = w, i
			r, err := RunFloe(ctx, wj)
			if err != nil {
				errs[i] = fmt.Errorf("worker %d of %d: %w", i, w, err)
				cancel() // the others would wait for it until their timeout
			}
			res[i] = r
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return res, nil
}

// ManifestRequests sums the requests of the committed epochs that read
// input files (EpochCost's Gets, Puts, Lists: the manifests' stats) under
// the file:// state root stateDir; run with retain_epochs above the epoch
// count so that every manifest is still there. It returns the number of
// those epochs and their total.
func ManifestRequests(stateDir, pipeline string) (int, cluster.Requests, error) {
	costs, err := EpochCosts(stateDir, pipeline)
	if err != nil {
		return 0, cluster.Requests{}, err
	}
	var n int
	var t cluster.Requests
	for _, c := range costs {
		if c.Files == 0 {
			continue // the drain's epoch
		}
		n++
		t = t.Add(cluster.Requests{Puts: c.Puts, Gets: c.Gets, Lists: c.Lists})
	}
	if n == 0 {
		return 0, t, fmt.Errorf("manifest requests: no epoch under %s read files", stateDir)
	}
	return n, t, nil
}

// ModelRequests is what the cost model (cluster.Protocol and cluster.Work)
// says the next epoch of j's pipeline costs with w workers, as `floe plan
// --workers w` prints it: run it on j's fresh state. For w = 1 it is the
// work alone, for the epoch shape the w = 2 plan computes.
func ModelRequests(ctx context.Context, j FloeJob, w int) (*engine.EpochRequests, error) {
	p, err := Pipeline(j)
	if err != nil {
		return nil, err
	}
	rep, err := engine.Plan(ctx, p, engine.Options{Workers: max(w, 2)})
	if err != nil {
		return nil, fmt.Errorf("plan --workers %d: %w", w, err)
	}
	er := rep.EpochRequests
	if er == nil {
		return nil, fmt.Errorf("plan --workers %d: no epoch requests in the plan", w)
	}
	if w < 2 {
		s := cluster.Shape{Workers: 1, Parallelism: p.State.Parallelism, Files: er.Files, Rounds: er.Rounds}
		er = &engine.EpochRequests{Files: er.Files, Rounds: er.Rounds, Protocol: cluster.Protocol(s), Work: cluster.Work(s)}
		er.Dollars = er.Protocol.Add(er.Work).Dollars()
	}
	return er, nil
}
