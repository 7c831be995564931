package epoch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// Committer runs the commit protocol for one pipeline. Its Store is rooted at
// <state-url>/<pipeline>/; Sink, when set, at the sink URL.
type Committer struct {
	Store store.Store
	Sink  store.Store
	// Pipeline is the pipeline name recorded in every document.
	Pipeline string
	Log      *slog.Logger
	// NewAttempt returns a fresh attempt UUID (tests inject a sequence).
	NewAttempt func() string
	// Now is the clock (tests inject one).
	Now func() time.Time
	// ResolveTries bounds how often an unknown commit outcome is re-probed.
	ResolveTries int

	// manifests caches decoded manifests by key. A manifest is immutable
	// once created, so a cached one is always current until retention
	// deletes it (which evicts it).
	mu          sync.Mutex
	manifests   map[string]*manifest.Manifest
	generations map[int64]*manifest.Generation
	// traced: per generation restored from a savepoint, whether the
	// savepoint is a copy of this state's epoch (LineageParent).
	traced map[int64]bool
}

func (c *Committer) cached(key string) *manifest.Manifest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.manifests[key]
}

func (c *Committer) remember(key string, m *manifest.Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.manifests == nil {
		c.manifests = map[string]*manifest.Manifest{}
	}
	c.manifests[key] = m
}

func (c *Committer) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.manifests, key)
}

// NewCommitter returns a Committer with production defaults.
func NewCommitter(state, sink store.Store, pipeline string, log *slog.Logger) *Committer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Committer{Store: state, Sink: sink, Pipeline: pipeline, Log: log}
}

func (c *Committer) attemptID() string {
	if c.NewAttempt != nil {
		return c.NewAttempt()
	}
	return uuid.NewString()
}

func (c *Committer) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

func (c *Committer) resolveTries() int {
	if c.ResolveTries > 0 {
		return c.ResolveTries
	}
	return 5
}

// Head is the committed state a run continues from.
type Head struct {
	// Latest is the decoded _latest.json; nil for a pipeline that never
	// committed.
	Latest *manifest.Latest
	// ETag of _latest.json as read ("" if absent): the swap's condition.
	ETag string
	// Manifest is the manifest Latest points to (nil if none).
	Manifest *manifest.Manifest
	// Generation is the topology of Manifest's generation (nil if none).
	Generation *manifest.Generation
}

// Ref returns the head's (generation, epoch), or nil for an empty pipeline.
func (h *Head) Ref() *manifest.Ref {
	if h == nil || h.Manifest == nil {
		return nil
	}
	return &manifest.Ref{Generation: h.Manifest.Generation, Epoch: h.Manifest.Epoch}
}

// Epoch returns the head's epoch, 0 for an empty pipeline.
func (h *Head) Epoch() int64 {
	if h == nil || h.Manifest == nil {
		return 0
	}
	return h.Manifest.Epoch
}

// getLatest reads _latest.json. A missing pointer is (nil, "", nil).
func (c *Committer) getLatest(ctx context.Context) (*manifest.Latest, string, error) {
	data, etag, err := c.Store.Get(ctx, manifest.LatestPath)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", manifest.LatestPath, err)
	}
	l, err := manifest.DecodeLatest(manifest.LatestPath, data)
	if err != nil {
		return nil, "", err
	}
	return l, etag, nil
}

// ReadManifest reads and validates the manifest of (gen, epoch).
func (c *Committer) ReadManifest(ctx context.Context, gen, epoch int64) (*manifest.Manifest, error) {
	key := manifest.ManifestPath(gen, epoch)
	if m := c.cached(key); m != nil {
		return m, nil
	}
	data, _, err := c.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	m, err := manifest.DecodeManifest(key, data)
	if err != nil {
		return nil, err
	}
	if m.Generation != gen || m.Epoch != epoch {
		return nil, fmt.Errorf("manifest %s: records generation %d epoch %d: %w", key, m.Generation, m.Epoch, ErrCorrupt)
	}
	c.remember(key, m)
	return m, nil
}

// ReadGeneration reads and validates gen=N/_generation.json.
func (c *Committer) ReadGeneration(ctx context.Context, gen int64) (*manifest.Generation, error) {
	key := manifest.GenerationPath(gen)
	data, _, err := c.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read generation %s: %w", key, err)
	}
	g, err := manifest.DecodeGeneration(key, data)
	if err != nil {
		return nil, err
	}
	if g.Generation != gen {
		return nil, fmt.Errorf("generation %s: records generation %d: %w", key, g.Generation, ErrCorrupt)
	}
	return g, nil
}

// Recover reads _latest.json, rolls it forward over every committed manifest
// whose parent is the current head (invariant 3), and returns the head. It
// writes only _latest.json, and only forward.
func (c *Committer) Recover(ctx context.Context) (*Head, error) {
	for {
		latest, etag, err := c.getLatest(ctx)
		if err != nil {
			return nil, err
		}
		head := &Head{Latest: latest, ETag: etag}
		if latest != nil {
			if head.Manifest, err = c.ReadManifest(ctx, latest.Generation, latest.Epoch); err != nil {
				return nil, fmt.Errorf("recover: %s points at a manifest that cannot be read: %w", manifest.LatestPath, err)
			}
		}
		// Roll forward as far as committed manifests go.
		rolled := head.Manifest
		for {
			next, err := c.nextOnChain(ctx, rolled)
			if err != nil {
				return nil, err
			}
			if next == nil {
				break
			}
			c.Log.Info("rolling forward over committed manifest", "generation", next.Generation, "epoch", next.Epoch)
			rolled = next
		}
		if rolled != head.Manifest {
			ok, _, err := c.swapLatest(ctx, head.ETag, rolled, c.attemptID())
			if err != nil {
				return nil, fmt.Errorf("recover: roll %s forward to epoch %d: %w", manifest.LatestPath, rolled.Epoch, err)
			}
			if !ok {
				continue // someone else moved it; start over from what they wrote
			}
			continue // re-read to get the new ETag and confirm
		}
		if head.Manifest != nil {
			if head.Generation, err = c.ReadGeneration(ctx, head.Manifest.Generation); err != nil {
				return nil, err
			}
		}
		return head, nil
	}
}

// Peek returns the committed head as Recover would, rolled forward over
// committed manifests, but writes nothing: for read-only commands.
func (c *Committer) Peek(ctx context.Context) (*Head, error) {
	latest, etag, err := c.getLatest(ctx)
	if err != nil {
		return nil, err
	}
	head := &Head{Latest: latest, ETag: etag}
	if latest != nil {
		if head.Manifest, err = c.ReadManifest(ctx, latest.Generation, latest.Epoch); err != nil {
			return nil, fmt.Errorf("%s points at a manifest that cannot be read: %w", manifest.LatestPath, err)
		}
	}
	for {
		next, err := c.nextOnChain(ctx, head.Manifest)
		if err != nil {
			return nil, err
		}
		if next == nil {
			break
		}
		head.Manifest = next
	}
	if head.Manifest != nil {
		if head.Generation, err = c.ReadGeneration(ctx, head.Manifest.Generation); err != nil {
			return nil, err
		}
	}
	return head, nil
}

// nextOnChain finds the committed manifest of epoch cur.Epoch+1 whose parent
// is cur, in cur's generation or a newer one. With several candidates (two
// writers on different generations) the lowest generation wins.
func (c *Committer) nextOnChain(ctx context.Context, cur *manifest.Manifest) (*manifest.Manifest, error) {
	var (
		parent *manifest.Ref
		epoch  int64 = 1
		gen    int64 = 1
	)
	if cur != nil {
		parent = &manifest.Ref{Generation: cur.Generation, Epoch: cur.Epoch}
		epoch, gen = cur.Epoch+1, cur.Generation
	}
	for g := gen; ; g++ {
		if g > gen {
			// Newer generations exist only if their _generation.json does.
			_, _, err := c.Store.Get(ctx, manifest.GenerationPath(g))
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("probe generation %d: %w", g, err)
			}
		}
		m, err := c.ReadManifest(ctx, g, epoch)
		if errors.Is(err, store.ErrNotFound) {
			if cur == nil && g == gen {
				// A fresh pipeline's first generation may not exist yet,
				// and a pipeline restored from a savepoint into an empty
				// state starts at a later generation and epoch.
				return c.firstOnChain(ctx)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if sameRef(m.Parent, parent) {
			return m, nil
		}
	}
}

// firstOnChain finds, without a pointer, the first committed manifest of a
// pipeline: the manifest without a parent of the lowest generation (then
// epoch). Only a pipeline whose pointer was never written gets here, so the
// listing is of a nearly empty state.
func (c *Committer) firstOnChain(ctx context.Context) (*manifest.Manifest, error) {
	objs, err := c.Store.List(ctx, "gen=")
	if err != nil {
		return nil, fmt.Errorf("find the first manifest: list: %w", err)
	}
	var cands []manifest.KeyInfo
	for _, o := range objs {
		if info, ok := manifest.ParseKey(o.Key); ok && info.Kind == manifest.KeyManifest {
			cands = append(cands, info)
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		return a.Generation < b.Generation || a.Generation == b.Generation && a.Epoch < b.Epoch
	})
	for _, k := range cands {
		m, err := c.ReadManifest(ctx, k.Generation, k.Epoch)
		if err != nil {
			return nil, err
		}
		if m.Parent == nil {
			return m, nil
		}
	}
	return nil, nil
}

func sameRef(a, b *manifest.Ref) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// swapLatest moves _latest.json to m with compare-and-swap on etag ("" =
// create). It returns ok=false when the pointer was moved by someone else
// (the caller rereads). An unknown outcome is resolved by reading back.
func (c *Committer) swapLatest(ctx context.Context, etag string, m *manifest.Manifest, attempt string) (ok bool, newETag string, err error) {
	l := &manifest.Latest{
		FormatVersion: manifest.FormatVersion,
		Generation:    m.Generation,
		Epoch:         m.Epoch,
		Manifest:      manifest.ManifestPath(m.Generation, m.Epoch),
		Attempt:       attempt,
	}
	data, err := manifest.EncodeLatest(l)
	if err != nil {
		return false, "", err
	}
	opts := store.PutOptions{IfMatch: etag, IfNotExist: etag == ""}
	var lastErr error
	for try := 0; try < c.resolveTries(); try++ {
		newETag, err = c.Store.Put(ctx, manifest.LatestPath, data, opts)
		if err == nil {
			return true, newETag, nil
		}
		if ctx.Err() != nil {
			return false, "", fmt.Errorf("%w: put %s: %w", ErrCommitUnknown, manifest.LatestPath, err)
		}
		// Unknown or lost: read back. Our attempt's body means it landed.
		cur, curTag, rerr := c.getLatest(ctx)
		if rerr != nil {
			lastErr = errors.Join(err, rerr)
			continue
		}
		if cur != nil && cur.Attempt == attempt && cur.Epoch == m.Epoch && cur.Generation == m.Generation {
			return true, curTag, nil
		}
		if errors.Is(err, store.ErrPrecondition) || curTag != etag {
			return false, "", nil // moved by someone else
		}
		lastErr = err // unchanged: our write did not land; try again
	}
	return false, "", fmt.Errorf("%w: put %s: %w", ErrCommitUnknown, manifest.LatestPath, lastErr)
}
