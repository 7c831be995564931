package cluster_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

const attemptA = "0f8fad5b-d9cb-469f-a165-70867728950e"

func newWorker(t *testing.T, st store.Store, idx int, topo cluster.Topology, mod ...func(*cluster.Config)) *cluster.Worker {
	t.Helper()
	cfg := cluster.Config{Store: st, Pipeline: "p", Worker: idx, Topology: topo, Timeout: 300 * time.Millisecond,
		TakeOver: 20 * time.Millisecond, PollMin: time.Millisecond, PollMax: 10 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	w, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func proposal(keys ...string) cluster.Proposer {
	return func(context.Context) (*manifest.Decision, error) {
		var files []cluster.File
		for _, k := range keys {
			files = append(files, cluster.File{Key: k, Size: 10})
		}
		return &manifest.Decision{Files: cluster.AssignFiles(files, 1), Watermark: manifest.NoWatermark}, nil
	}
}

func join(t *testing.T, w *cluster.Worker, epoch int64) *cluster.Epoch {
	t.Helper()
	var parent *manifest.Ref
	if epoch > 1 {
		parent = &manifest.Ref{Generation: 1, Epoch: epoch - 1}
	}
	ep, err := w.Join(context.Background(), 1, epoch, parent, proposal("a"))
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestJoinRace: 16 workers racing to decide one epoch (each with its own
// proposal) all end with one decision, created by exactly one of them.
func TestJoinRace(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			topo := cluster.Topology{Workers: 16, Parallelism: 16, MaxParallelism: 128}
			eps := make([]*cluster.Epoch, 16)
			errs := make([]error, 16)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 16 {
				w := newWorker(t, st, i, topo, func(c *cluster.Config) { c.TakeOver = time.Nanosecond })
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					eps[i], errs[i] = w.Join(context.Background(), 1, 1, nil, proposal(fmt.Sprintf("from-%d", i)))
				}()
			}
			close(start)
			wg.Wait()
			won := 0
			for i, ep := range eps {
				if errs[i] != nil {
					t.Fatalf("worker %d: %v", i, errs[i])
				}
				if ep.Decision.Attempt != eps[0].Decision.Attempt || ep.Decision.Files[0].Key != eps[0].Decision.Files[0].Key {
					t.Fatalf("worker %d follows decision %s (%s), worker 0 %s", i, ep.Decision.Attempt, ep.Decision.Files[0].Key, eps[0].Decision.Attempt)
				}
				if ep.Won {
					won++
					if want := fmt.Sprintf("from-%d", i); ep.Decision.Files[0].Key != want || ep.Decision.Proposer != i {
						t.Errorf("worker %d won with %s by proposer %d", i, ep.Decision.Files[0].Key, ep.Decision.Proposer)
					}
				}
			}
			if won != 1 {
				t.Fatalf("%d workers think they created the decision", won)
			}
		})
	}
}

// TestJoinRefuses: a worker of another topology or on another parent does
// not join a decided epoch.
func TestJoinRefuses(t *testing.T) {
	st := open(t, "file://"+t.TempDir())
	topo := cluster.Topology{Workers: 3, Parallelism: 6, MaxParallelism: 128}
	join(t, newWorker(t, st, 0, topo), 2)
	for _, other := range []cluster.Topology{{2, 6, 128}, {3, 4, 128}} {
		_, err := newWorker(t, st, 1, other).Join(context.Background(), 1, 2, &manifest.Ref{Generation: 1, Epoch: 1}, proposal("x"))
		if !errors.Is(err, cluster.ErrTopology) {
			t.Errorf("%s joined an epoch of %s: %v", other, topo, err)
		}
	}
	_, err := newWorker(t, st, 1, topo).Join(context.Background(), 1, 2, &manifest.Ref{Generation: 1, Epoch: 7}, proposal("x"))
	if !errors.Is(err, cluster.ErrFenced) {
		t.Errorf("a worker on another parent joined: %v", err)
	}
	if _, err := cluster.New(cluster.Config{Store: st, Pipeline: "p", Worker: 3, Topology: topo}); err == nil {
		t.Error("worker index 3 of 3 accepted")
	}
}

// TestLoneWorker: a worker whose peers never come gives up at each barrier
// after the timeout, naming the missing workers.
func TestLoneWorker(t *testing.T) {
	st := open(t, "file://"+t.TempDir())
	topo := cluster.Topology{Workers: 3, Parallelism: 3, MaxParallelism: 12}
	w := newWorker(t, st, 1, topo)
	ep := join(t, w, 1) // worker 0 never decides: worker 1 takes over
	if !ep.Won || ep.Decision.Proposer != 1 {
		t.Fatalf("worker 1 did not decide: %+v", ep.Decision)
	}
	ctx := context.Background()
	if _, err := ep.Send(ctx, 1, [][]byte{[]byte("to 0"), nil, []byte("to 2")}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := ep.Receive(ctx, 1)
	var me *cluster.MissingError
	if !errors.As(err, &me) || !errors.Is(err, cluster.ErrPeersMissing) || !slices.Equal(me.Workers, []int{0, 2}) || me.Barrier != "exchange round 1" {
		t.Fatalf("Receive: %v", err)
	}
	t.Log(err)
	if _, err := ep.WritePart(ctx, &manifest.WorkerPart{}); err != nil {
		t.Fatal(err)
	}
	_, _, err = ep.Commit(ctx, func(*manifest.Decision, []*manifest.WorkerPart) ([]byte, error) { return nil, errors.New("never") })
	if !errors.As(err, &me) || !slices.Equal(me.Workers, []int{0, 2}) || me.Barrier != "parts" {
		t.Fatalf("Commit: %v", err)
	}
}

// TestStaleGenerationAtBarrier: a worker waiting at a barrier for peers
// that a newer generation replaced (a rescale, another Job) stops with
// ErrFenced within about PollMax of the newer generation's document
// appearing, not at --worker-timeout: the exchange round and the parts.
// The timeout here is an hour and the context gives up after 30 s, so only
// the barrier's own generation check can end the wait in time.
func TestStaleGenerationAtBarrier(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			topo := cluster.Topology{Workers: 3, Parallelism: 3, MaxParallelism: 12}
			w := newWorker(t, st, 0, topo, func(c *cluster.Config) { c.Timeout = time.Hour; c.TakeOver = time.Nanosecond })
			ep := join(t, w, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := ep.Send(ctx, 1, [][]byte{nil, []byte("to 1"), []byte("to 2")}, nil); err != nil {
				t.Fatal(err)
			}
			newer := func() {
				time.Sleep(50 * time.Millisecond)
				if _, err := st.Put(ctx, manifest.GenerationPath(2), []byte(`{}`), store.PutOptions{}); err != nil {
					t.Error(err)
				}
			}
			go newer()
			_, err := ep.Receive(ctx, 1)
			if !errors.Is(err, cluster.ErrFenced) || !strings.Contains(err.Error(), "exchange round 1") {
				t.Fatalf("Receive waiting for replaced peers: %v, want ErrFenced at exchange round 1", err)
			}
			t.Log(err)
			if err := st.Delete(ctx, manifest.GenerationPath(2)); err != nil {
				t.Fatal(err)
			}
			if _, err := ep.WritePart(ctx, &manifest.WorkerPart{}); err != nil {
				t.Fatal(err)
			}
			go newer()
			_, _, err = ep.Commit(ctx, func(*manifest.Decision, []*manifest.WorkerPart) ([]byte, error) { return nil, errors.New("never") })
			if !errors.Is(err, cluster.ErrFenced) || !strings.Contains(err.Error(), "parts") {
				t.Fatalf("Commit waiting for replaced peers: %v, want ErrFenced at the parts", err)
			}
		})
	}
}

// TestSendReuse: a second Send of a round (a restarted worker) keeps the
// first object, which receivers read; Receive checks segment checksums and
// the identity of what it reads.
func TestSendReuse(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := mk(t)
			topo := cluster.Topology{Workers: 2, Parallelism: 2, MaxParallelism: 8}
			e0 := join(t, newWorker(t, st, 0, topo), 1)
			e1 := join(t, newWorker(t, st, 1, topo), 1)
			big := bytes.Repeat([]byte("m"), 10000) // meta beyond the first header read
			if reused, err := e1.Send(ctx, 1, [][]byte{[]byte("first"), nil}, big); err != nil || reused {
				t.Fatal(reused, err)
			}
			if reused, err := e1.Send(ctx, 1, [][]byte{[]byte("second"), nil}, nil); err != nil || !reused {
				t.Fatalf("second Send: reused %v, %v", reused, err)
			}
			in, err := e0.Receive(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(in) != 1 || in[0].Sender != 1 || string(in[0].Data) != "first" || !bytes.Equal(in[0].Meta, big) {
				t.Fatalf("received %+v", in)
			}
			// A damaged object is refused, naming it.
			key := manifest.ExchangePath(1, 1, e0.Decision.Attempt, 1, 1)
			data, _, err := st.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			for _, at := range []int{20, len(data) - 2} { // the header (its checksum) and the segment (its CRC)
				bad := bytes.Clone(data)
				bad[at] ^= 1
				if _, err := st.Put(ctx, key, bad, store.PutOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := e0.Receive(ctx, 1); !errors.Is(err, cluster.ErrCorrupt) {
					t.Errorf("byte %d flipped: %v", at, err)
				}
			}
			// An object of exchange format version 1 (whose round 1 held no
			// rows) is refused, naming the version.
			v1 := bytes.Clone(data)
			binary.LittleEndian.PutUint16(v1[12:], 1)
			if _, err := st.Put(ctx, key, v1, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e0.Receive(ctx, 1); !errors.Is(err, cluster.ErrCorrupt) || !strings.Contains(err.Error(), "format version 1") {
				t.Errorf("a version 1 object: %v", err)
			}
			// SendWith writes the same object as Send, segments in place.
			if reused, err := e0.SendWith(ctx, 2, []byte("meta"), 3, func(r int, w *bytes.Buffer) error {
				w.WriteString("to ")
				w.WriteString(strconv.Itoa(r))
				return nil
			}); err != nil || reused {
				t.Fatal(reused, err)
			}
			if _, err := e1.Send(ctx, 2, [][]byte{[]byte("back"), nil}, nil); err != nil {
				t.Fatal(err)
			}
			if in, err := e1.Receive(ctx, 2); err != nil || len(in) != 1 || string(in[0].Data) != "to 1" || string(in[0].Meta) != "meta" {
				t.Fatalf("SendWith, received %+v, %v", in, err)
			}
			// Segments for oneself are refused: own rows stay local.
			if _, err := e0.Send(ctx, 1, [][]byte{[]byte("self"), nil}, nil); err == nil {
				t.Error("a segment for the sender itself was accepted")
			}
		})
	}
}

// buildFrom is a deterministic builder over the merged parts.
func buildFrom(extra string) cluster.Builder {
	return func(d *manifest.Decision, parts []*manifest.WorkerPart) ([]byte, error) {
		mg, err := cluster.MergeParts(d, parts)
		if err != nil {
			return nil, err
		}
		m := &manifest.Manifest{FormatVersion: manifest.FormatVersion, Pipeline: d.Pipeline, Generation: d.Generation, Epoch: d.Epoch,
			Attempt: d.Attempt, Parent: d.Parent, CreatedAt: d.CreatedAt, Watermark: manifest.NoWatermark,
			Counters: mg.Counters, Operators: mg.Operators, Outputs: mg.Outputs, SideOutputs: mg.SideOutputs}
		if extra != "" {
			m.Source.Inline = []string{extra}
			m.Source.Count = 1
		}
		return manifest.EncodeManifest(m)
	}
}

// TestCommit: the manifest is created once from all parts; a worker with
// a builder that disagrees is ErrNotDeterministic; a manifest of another
// attempt, a pointer past the epoch or a newer generation fence the
// commit.
func TestCommit(t *testing.T) {
	ctx := context.Background()
	topo := cluster.Topology{Workers: 2, Parallelism: 4, MaxParallelism: 16}
	setup := func(t *testing.T) (store.Store, []*cluster.Epoch) {
		st := open(t, "file://"+t.TempDir())
		eps := []*cluster.Epoch{join(t, newWorker(t, st, 0, topo), 1), join(t, newWorker(t, st, 1, topo), 1)}
		for i, ep := range eps {
			if _, err := ep.WritePart(ctx, &manifest.WorkerPart{Counters: manifest.Counters{RowsIn: int64(10 + i)}}); err != nil {
				t.Fatal(err)
			}
		}
		return st, eps
	}
	t.Run("once", func(t *testing.T) {
		_, eps := setup(t)
		data, how, err := eps[0].Commit(ctx, buildFrom(""))
		if err != nil || how != cluster.Created {
			t.Fatal(how, err)
		}
		m, err := manifest.DecodeManifest("m", data)
		if err != nil || m.Counters.RowsIn != 21 || m.Attempt != eps[0].Decision.Attempt {
			t.Fatalf("%+v %v", m, err)
		}
		again, how, err := eps[1].Commit(ctx, buildFrom(""))
		if err != nil || how != cluster.Found || !bytes.Equal(again, data) {
			t.Fatal(how, err)
		}
		if ok, err := eps[1].Committed(ctx); !ok || err != nil {
			t.Fatal(ok, err)
		}
		// A rewritten part is the same record: reused.
		if reused, err := eps[1].WritePart(ctx, &manifest.WorkerPart{}); err != nil || !reused {
			t.Fatal(reused, err)
		}
	})
	t.Run("not deterministic", func(t *testing.T) {
		st, _ := setup(t)
		// Worker 1 commits first (worker 0 late), then worker 0 builds
		// other bytes from the same parts.
		e1 := join(t, newWorker(t, st, 1, topo, func(c *cluster.Config) { c.TakeOver = time.Nanosecond }), 1)
		if _, how, err := e1.Commit(ctx, buildFrom("")); err != nil || how != cluster.Created {
			t.Fatal(how, err)
		}
		e0 := join(t, newWorker(t, st, 0, topo), 1)
		if _, _, err := e0.Commit(ctx, buildFrom("clock")); !errors.Is(err, cluster.ErrNotDeterministic) {
			t.Fatalf("another manifest from the same parts: %v", err)
		}
		if _, how, err := e0.Commit(ctx, buildFrom("")); err != nil || how != cluster.Found {
			t.Fatal(how, err)
		}
	})
	t.Run("fenced by another attempt", func(t *testing.T) {
		st, eps := setup(t)
		other := buildFrom("")
		data, err := other(&manifest.Decision{Pipeline: "p", Generation: 1, Epoch: 1, Attempt: attemptA, Workers: 2, Parallelism: 4, MaxParallelism: 16, CreatedAt: time.Now()},
			[]*manifest.WorkerPart{{Worker: 0}, {Worker: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, manifest.ManifestPath(1, 1), data, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := eps[0].Commit(ctx, buildFrom("")); !errors.Is(err, cluster.ErrFenced) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("fenced by a newer generation", func(t *testing.T) {
		st, eps := setup(t)
		if _, err := st.Put(ctx, manifest.GenerationPath(2), []byte("{}"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := eps[0].Commit(ctx, buildFrom("")); !errors.Is(err, cluster.ErrFenced) {
			t.Fatalf("%v", err)
		}
		if _, _, err := st.Get(ctx, manifest.ManifestPath(1, 1)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a fenced worker created the manifest: %v", err)
		}
		// Nor does it decide the next epoch.
		w := newWorker(t, st, 0, topo)
		if _, err := w.Join(ctx, 1, 2, &manifest.Ref{Generation: 1, Epoch: 1}, proposal("b")); !errors.Is(err, cluster.ErrFenced) {
			t.Fatalf("Join: %v", err)
		}
	})
	t.Run("fenced by the pointer", func(t *testing.T) {
		st, eps := setup(t)
		l, _ := manifest.EncodeLatest(manifest.NewLatest(1, 1, attemptA))
		if _, err := st.Put(ctx, manifest.LatestPath, l, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := eps[0].Commit(ctx, buildFrom("")); !errors.Is(err, cluster.ErrFenced) {
			t.Fatalf("%v", err)
		}
		// The pointer naming this epoch's own attempt is no fence.
		l, _ = manifest.EncodeLatest(manifest.NewLatest(1, 1, eps[0].Decision.Attempt))
		if _, err := st.Put(ctx, manifest.LatestPath, l, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := eps[0].Fence(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRequestsMatchCostModel runs one epoch of W = 4 workers with one
// exchange round in sequence (so no barrier polls) and counts the
// requests the stores received: they equal cluster.Protocol's count, on
// file:// (one per call) and on S3 (counted at the HTTP client), with every
// segment large enough to need its own ranged GET.
func TestRequestsMatchCostModel(t *testing.T) {
	for name, url := range map[string]func(t *testing.T) string{
		"file": func(t *testing.T) string { return "file://" + t.TempDir() },
		"s3":   func(t *testing.T) string { return s3test.Shared(t).NewBucket(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, url(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			const w = 4
			topo := cluster.Topology{Workers: w, Parallelism: 8, MaxParallelism: 128}
			before, _ := store.CountRequests(st)
			eps := make([]*cluster.Epoch, w)
			for i := range w {
				eps[i] = join(t, newWorker(t, st, i, topo, func(c *cluster.Config) { c.TakeOver = time.Minute }), 1)
			}
			seg := bytes.Repeat([]byte("r"), 8192)
			for i, ep := range eps {
				segs := make([][]byte, w)
				for r := range w {
					if r != i {
						segs[r] = seg
					}
				}
				if _, err := ep.Send(ctx, 1, segs, []byte("meta")); err != nil {
					t.Fatal(err)
				}
			}
			for _, ep := range eps {
				in, err := ep.Receive(ctx, 1)
				if err != nil || len(in) != w-1 {
					t.Fatal(len(in), err)
				}
			}
			for _, ep := range eps {
				// As the engine does before it writes state and outputs.
				if err := ep.Fence(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := ep.WritePart(ctx, &manifest.WorkerPart{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, ep := range eps {
				if _, _, err := ep.Commit(ctx, buildFrom("")); err != nil {
					t.Fatal(err)
				}
			}
			after, _ := store.CountRequests(st)
			got := after.Sub(before)
			want := cluster.Protocol(cluster.Shape{Workers: w, Parallelism: 8, Rounds: 1})
			if got.Put != want.Puts || got.Get != want.Gets || got.List != 0 || got.Delete != 0 {
				t.Fatalf("requests %+v, cost model %+v", got, want)
			}
			t.Logf("W=%d, 1 round: %d PUT, %d GET (model %d, %d)", w, got.Put, got.Get, want.Puts, want.Gets)
		})
	}
}

// stepClock is a clock that moves by step at every reading.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// TestIdle: a proposer that finds no input leaves an idle note, and the
// workers waiting for the decision stop with ErrIdle without looking
// themselves; the next Join with input decides as usual.
func TestIdle(t *testing.T) {
	ctx := context.Background()
	st := open(t, "file://"+t.TempDir())
	topo := cluster.Topology{Workers: 3, Parallelism: 3, MaxParallelism: 12}
	var proposals sync.Map
	counting := func(i int) cluster.Proposer {
		return func(context.Context) (*manifest.Decision, error) {
			proposals.Store(i, true)
			return nil, nil
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := 1; i < 3; i++ {
		// A frozen clock a minute behind: they started waiting before
		// worker 0 looked, and never take over.
		frozen := (&stepClock{t: time.Now().Add(-time.Minute)}).Now
		w := newWorker(t, st, i, topo, func(c *cluster.Config) { c.TakeOver, c.Timeout, c.Now = time.Minute, time.Hour, frozen })
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.Join(ctx, 1, 1, nil, counting(i))
		}()
	}
	_, errs[0] = newWorker(t, st, 0, topo).Join(ctx, 1, 1, nil, counting(0))
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, cluster.ErrIdle) {
			t.Errorf("worker %d: %v, want ErrIdle", i, err)
		}
	}
	for i := 1; i < 3; i++ {
		if _, ok := proposals.Load(i); ok {
			t.Errorf("worker %d looked for input itself", i)
		}
	}
	if _, ok := proposals.Load(0); !ok {
		t.Error("worker 0 did not look")
	}
	// Input arrived: the next look decides.
	ep := join(t, newWorker(t, st, 0, topo), 1)
	if !ep.Won {
		t.Fatal("worker 0 did not decide")
	}
	if got := join(t, newWorker(t, st, 2, topo), 1); got.Decision.Attempt != ep.Decision.Attempt {
		t.Fatal("worker 2 follows another decision")
	}
}

// TestIdleOnce: a worker of a run that ends when idle (Config.Once) that
// reaches an epoch after its proposer already found nothing stops with
// ErrIdle without looking itself, as long as the note is newer than its
// last decided epoch; a note older than anything this worker joined (an
// earlier run's) is not taken: it looks. Without Once a worker that
// started waiting after the note looks too.
func TestIdleOnce(t *testing.T) {
	ctx := context.Background()
	st := open(t, "file://"+t.TempDir())
	topo := cluster.Topology{Workers: 2, Parallelism: 2, MaxParallelism: 12}
	once := func(c *cluster.Config) { c.Once = true }
	looked := map[string]bool{}
	looking := func(name string) cluster.Proposer {
		return func(context.Context) (*manifest.Decision, error) {
			looked[name] = true
			return nil, nil
		}
	}
	w1 := newWorker(t, st, 1, topo, once)
	w1plain := newWorker(t, st, 1, topo)
	ep := join(t, newWorker(t, st, 0, topo), 1)
	for _, w := range []*cluster.Worker{w1, w1plain} {
		if got := join(t, w, 1); got.Decision.Attempt != ep.Decision.Attempt {
			t.Fatal("worker 1 follows another decision")
		}
	}
	parent := &manifest.Ref{Generation: 1, Epoch: 1}
	time.Sleep(5 * time.Millisecond)
	if _, err := newWorker(t, st, 0, topo).Join(ctx, 1, 2, parent, looking("w0")); !errors.Is(err, cluster.ErrIdle) {
		t.Fatalf("worker 0: %v, want ErrIdle", err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := w1.Join(ctx, 1, 2, parent, looking("once")); !errors.Is(err, cluster.ErrIdle) || looked["once"] {
		t.Errorf("worker 1 (once) after the idle note: %v, looked itself %v; want ErrIdle without looking", err, looked["once"])
	}
	if _, err := w1plain.Join(ctx, 1, 2, parent, looking("plain")); !errors.Is(err, cluster.ErrIdle) || !looked["plain"] {
		t.Errorf("worker 1 (not once) after the idle note: %v, looked itself %v; want it to look", err, looked["plain"])
	}
	if _, err := newWorker(t, st, 1, topo, once).Join(ctx, 1, 2, parent, looking("fresh")); !errors.Is(err, cluster.ErrIdle) || !looked["fresh"] {
		t.Errorf("a new worker 1 (once) and an earlier note: %v, looked itself %v; want it to look", err, looked["fresh"])
	}
	// A named run: a worker of the same run restarted after the note takes
	// it; one of another run looks.
	named := func(run string) func(*cluster.Config) {
		return func(c *cluster.Config) { c.Once, c.Run = true, run }
	}
	if _, err := newWorker(t, st, 0, topo, named("job-1")).Join(ctx, 1, 2, parent, looking("job-1 w0")); !errors.Is(err, cluster.ErrIdle) {
		t.Fatalf("worker 0 of job-1: %v, want ErrIdle", err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := newWorker(t, st, 1, topo, named("job-1")).Join(ctx, 1, 2, parent, looking("job-1 w1")); !errors.Is(err, cluster.ErrIdle) || looked["job-1 w1"] {
		t.Errorf("a restarted worker 1 of the same run: %v, looked itself %v; want ErrIdle without looking", err, looked["job-1 w1"])
	}
	if _, err := newWorker(t, st, 1, topo, named("job-2")).Join(ctx, 1, 2, parent, looking("job-2 w1")); !errors.Is(err, cluster.ErrIdle) || !looked["job-2 w1"] {
		t.Errorf("worker 1 of the next run and the last run's note: %v, looked itself %v; want it to look", err, looked["job-2 w1"])
	}
}

// TestTakeOverOrder: with worker 0 gone, worker 1 decides after its
// take-over delay while worker 2, whose delay is twice as long, waits
// and follows it.
func TestTakeOverOrder(t *testing.T) {
	ctx := context.Background()
	st := open(t, "file://"+t.TempDir())
	topo := cluster.Topology{Workers: 3, Parallelism: 3, MaxParallelism: 12}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w1 := newWorker(t, st, 1, topo, func(c *cluster.Config) {
		c.TakeOver, c.Timeout = time.Minute, time.Hour
		c.Now = (&stepClock{t: base, step: 40 * time.Second}).Now // passes one minute at its third reading
	})
	w2 := newWorker(t, st, 2, topo, func(c *cluster.Config) {
		c.TakeOver, c.Timeout = time.Minute, time.Hour
		c.Now = (&stepClock{t: base, step: 0}).Now // never reaches its two minutes
	})
	var wg sync.WaitGroup
	var e2 *cluster.Epoch
	var err2 error
	called2 := false
	wg.Add(1)
	go func() {
		defer wg.Done()
		e2, err2 = w2.Join(ctx, 1, 1, nil, func(context.Context) (*manifest.Decision, error) {
			called2 = true
			return &manifest.Decision{}, nil
		})
	}()
	e1, err := w1.Join(ctx, 1, 1, nil, proposal("a"))
	wg.Wait()
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	if !e1.Won || e1.Decision.Proposer != 1 || called2 || e2.Decision.Attempt != e1.Decision.Attempt {
		t.Fatalf("worker 1 won %v (proposer %d); worker 2 proposed %v", e1.Won, e1.Decision.Proposer, called2)
	}
}
