package runner

import (
	"context"
	"runtime"
	"sync"

	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/store"
)

// prefetcher decodes the next epoch's files while the current epoch runs its
// windows, writes and commit, so the cores do not idle at phase boundaries.
// Decoding is a pure function of the file, so results are identical with or
// without it; a prefetched file the epoch does not take (max_rows_per_epoch
// cut it) waits for a later epoch. What it holds (estimated decoded size of
// the files started and not yet taken) stays within a quarter of the
// memory budget (two output parts' worth for a streamed plan, one without
// a keyed stage): files beyond that are decoded by their epoch.
type prefetcher struct {
	r      *Runner
	ctx    context.Context
	cancel context.CancelFunc
	Sem    chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	M      map[string]*future
	limit  int64 // bound on held (0: none)
	Held   int64
}

type future struct {
	done chan struct{}
	res  *fileResult
	err  error
	size int64 // estimated decoded size, counted in held
}

func NewPrefetcher(ctx context.Context, r *Runner) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	limit := r.Dc.MemLimit / 4
	if r.streamsEpochs() && r.Dc.MemLimit > 0 {
		// A streamed epoch overlaps decoding and writing itself; decoded
		// files held for it would undo its bound: only its first files.
		limit = min(limit, 2*decide.PartBytes(r.Dc.MemLimit))
	}
	return &prefetcher{r: r, ctx: ctx, cancel: cancel, Sem: make(chan struct{}, runtime.GOMAXPROCS(0)), M: map[string]*future{},
		limit: limit}
}

// Start decodes files in the background (those not already started), in
// order, while they fit the prefetch bound.
func (p *prefetcher) Start(files []store.ObjectInfo) {
	for _, f := range files {
		size := p.r.Dc.Estimate(f)
		p.mu.Lock()
		if _, ok := p.M[f.Key]; ok {
			p.mu.Unlock()
			continue
		}
		if p.limit > 0 && p.Held+size > p.limit {
			p.mu.Unlock()
			return // the rest is decoded by its epoch
		}
		p.Held += size
		fu := &future{done: make(chan struct{}), size: size}
		p.M[f.Key] = fu
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(fu.done)
			select {
			case p.Sem <- struct{}{}:
			case <-p.ctx.Done():
				fu.err = p.ctx.Err()
				return
			}
			defer func() { <-p.Sem }()
			fu.res, fu.err = p.r.decodeFile(p.ctx, f, 1)
		}()
	}
}

// Take returns the prefetched result of key, waiting for it, or ok=false
// when it was never started (or failed on cancellation: decode it again).
func (p *prefetcher) Take(ctx context.Context, key string) (*fileResult, error, bool) {
	p.mu.Lock()
	fu := p.M[key]
	delete(p.M, key)
	if fu != nil {
		p.Held -= fu.size
	}
	p.mu.Unlock()
	if fu == nil {
		return nil, nil, false
	}
	select {
	case <-fu.done:
	case <-ctx.Done():
		return nil, ctx.Err(), true
	}
	if fu.err != nil && p.ctx.Err() != nil {
		return nil, nil, false
	}
	return fu.res, fu.err, true
}

// Stop cancels what is in flight and waits for it.
func (p *prefetcher) Stop() {
	p.cancel()
	p.wg.Wait()
}
