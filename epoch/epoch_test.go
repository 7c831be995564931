package epoch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// backend opens a fresh (state, sink) pair of store URLs per call.
type backend struct {
	name string
	urls func(t testing.TB) (state, sink string)
}

func fileBackend() backend {
	return backend{name: "file", urls: func(t testing.TB) (string, string) {
		d := t.TempDir()
		return fileURL(d + "/state"), fileURL(d + "/sink")
	}}
}

// fileURL escapes characters such as '#' that test directory names contain.
func fileURL(dir string) string { return (&url.URL{Scheme: "file", Path: dir}).String() }

func open(t testing.TB, url string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// reference runs an uninterrupted pipeline and returns its snapshot and the
// number of store calls it made.
func reference(t testing.TB, b backend, seed uint64, epochs int64) (snapshot, int) {
	t.Helper()
	ctx := ctxT(t)
	su, ku := b.urls(t)
	st, sink := open(t, su), open(t, ku)
	f := store.NewFaulty(st, store.FaultPlan{})
	d := newDriver(seed)
	if err := d.run(ctx, t, d.committer(f, sink), epochs); err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	return takeSnapshot(ctx, t, st, sink, d.keep), f.Calls()
}

func TestUninterrupted(t *testing.T) {
	for _, b := range allBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			snap, calls := reference(t, b, 1, 4)
			if snap.Epoch != 4 || snap.RowsIn != 40 || len(snap.Sources) != 4 {
				t.Fatalf("snapshot = epoch %d rows %d sources %v", snap.Epoch, snap.RowsIn, snap.Sources)
			}
			var sum int64
			for _, v := range snap.State {
				sum += v
			}
			var want int64
			for e := int64(1); e <= 4; e++ {
				for _, kv := range input(1, e) {
					want += kv[1].(int64)
				}
			}
			if sum != want {
				t.Fatalf("state sum = %d, want %d", sum, want)
			}
			if len(snap.Outputs) != 3 { // keep=3
				t.Fatalf("outputs in retention = %d, want 3", len(snap.Outputs))
			}
			t.Logf("uninterrupted 4 epochs: %d store calls", calls)
		})
	}
}

// TestCrashSweep crashes at every store call of a run, in both modes, then
// recovers with a fresh store handle: the committed state equals that of an
// uninterrupted run.
func TestCrashSweep(t *testing.T) {
	const epochs = 3
	for _, b := range allBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			seeds := []uint64{1, 2, 3}
			if b.name != "file" || testing.Short() {
				seeds = seeds[:2]
			}
			for _, seed := range seeds {
				want, calls := reference(t, b, seed, epochs)
				t.Logf("seed %d: uninterrupted run makes %d calls", seed, calls)
				for _, mode := range []store.FaultMode{store.CrashBefore, store.CrashAfter} {
					for at := 0; at < calls; at++ {
						name := fmt.Sprintf("seed=%d/%s/at=%d", seed, mode, at)
						su, ku := b.urls(t)
						ctx := ctxT(t)
						st, sink := open(t, su), open(t, ku)
						f := store.NewFaulty(st, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: mode}}})
						d := newDriver(seed)
						err := d.run(ctx, t, d.committer(f, sink), epochs)
						if err == nil || !isCrash(err) {
							t.Fatalf("%s: run = %v, want a simulated crash", name, err)
						}
						// Recover with a fresh store handle and finish.
						st2 := open(t, su)
						d2 := newDriver(seed)
						d2.rng = rand.New(rand.NewPCG(seed, uint64(at)+1000)) // different attempt UUIDs
						if err := d2.run(ctx, t, d2.committer(st2, sink), epochs); err != nil {
							t.Fatalf("%s: recovery run: %v (crashed at %s)", name, err, f.Log()[len(f.Log())-1])
						}
						got := takeSnapshot(ctx, t, st2, sink, d.keep)
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("%s: recovered state differs from uninterrupted run\n got %+v\nwant %+v", name, got, want)
						}
						assertNoOrphans(t, ctx, st2, sink)
					}
				}
			}
		})
	}
}

// assertNoOrphans checks that after a completed run every state file is
// referenced by a retained manifest and every sink file by a manifest.
func assertNoOrphans(t *testing.T, ctx context.Context, st, sink store.Store) {
	t.Helper()
	c := epoch.NewCommitter(st, sink, "test", nil)
	head, err := c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := c.Chain(ctx, head, 100)
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]bool{manifest.LatestPath: true}
	outs := map[string]bool{}
	for _, m := range chain {
		ref[manifest.ManifestPath(m.Generation, m.Epoch)] = true
		for _, op := range m.Operators {
			for _, f := range op.Files {
				ref[f.Path] = true
			}
		}
		for _, o := range m.Outputs {
			outs[o.Path] = true
		}
	}
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if info, _ := manifest.ParseKey(o.Key); info.Kind == manifest.KeyGeneration {
			continue
		}
		if !ref[o.Key] {
			t.Errorf("unreferenced state object left behind: %s", o.Key)
		}
	}
	sobjs, err := sink.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range sobjs {
		if info, _ := manifest.ParseOutputName(o.Key); info.Epoch > chain[len(chain)-1].Epoch && !outs[o.Key] {
			t.Errorf("orphan output left behind: %s", o.Key)
		}
	}
}

// TestRollForward: a crash between the manifest create and the pointer swap
// leaves a committed epoch that the next start rolls forward.
func TestRollForward(t *testing.T) {
	for _, b := range allBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			su, ku := b.urls(t)
			st, sink := open(t, su), open(t, ku)
			d := newDriver(7)
			if err := d.run(ctx, t, d.committer(st, sink), 2); err != nil {
				t.Fatal(err)
			}
			f := store.NewFaulty(st, store.FaultPlan{Faults: []store.Fault{{
				Match: store.Match{Op: store.OpPut, KeyContains: manifest.ManifestFile}, At: 0, Mode: store.CrashAfter}}})
			if err := d.run(ctx, t, d.committer(f, sink), 3); !isCrash(err) {
				t.Fatalf("run = %v, want crash after manifest", err)
			}
			data, _, err := st.Get(ctx, manifest.LatestPath)
			if err != nil {
				t.Fatal(err)
			}
			l, _ := manifest.DecodeLatest("l", data)
			if l.Epoch != 2 {
				t.Fatalf("pointer at epoch %d before recovery, want 2", l.Epoch)
			}
			head, err := d.committer(open(t, su), sink).Recover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if head.Epoch() != 3 {
				t.Fatalf("recovered head epoch %d, want 3 (rolled forward)", head.Epoch())
			}
			data, _, _ = st.Get(ctx, manifest.LatestPath)
			l, _ = manifest.DecodeLatest("l", data)
			if l.Epoch != 3 {
				t.Fatalf("pointer at epoch %d after recovery, want 3", l.Epoch)
			}
			want, _ := reference(t, b, 7, 3)
			if got := takeSnapshot(ctx, t, st, sink, d.keep); !reflect.DeepEqual(got, want) {
				t.Fatalf("rolled-forward state differs\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestCorruptState: one flipped byte or a truncated state file makes restore
// fail naming the file, and nothing new is committed.
func TestCorruptState(t *testing.T) {
	for _, b := range allBackends(t) {
		for _, damage := range []string{"flip", "truncate", "delete"} {
			t.Run(b.name+"/"+damage, func(t *testing.T) {
				ctx := ctxT(t)
				su, ku := b.urls(t)
				st, sink := open(t, su), open(t, ku)
				d := newDriver(3)
				if err := d.run(ctx, t, d.committer(st, sink), 3); err != nil {
					t.Fatal(err)
				}
				c := d.committer(st, sink)
				head, err := c.Recover(ctx)
				if err != nil {
					t.Fatal(err)
				}
				victim := head.Manifest.Operators[0].Files[1].Path
				data, _, err := st.Get(ctx, victim)
				if err != nil {
					t.Fatal(err)
				}
				switch damage {
				case "flip":
					data[len(data)/2] ^= 0x01
				case "truncate":
					data = data[:len(data)-7]
				}
				if damage == "delete" {
					err = st.Delete(ctx, victim)
				} else {
					_, err = st.Put(ctx, victim, data, store.PutOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
				before, _ := st.List(ctx, "")
				err = d.run(ctx, t, d.committer(st, sink), 5)
				if !errors.Is(err, epoch.ErrCorrupt) || !strings.Contains(err.Error(), victim) {
					t.Fatalf("run on damaged state = %v, want ErrCorrupt naming %s", err, victim)
				}
				after, _ := st.List(ctx, "")
				if len(after) != len(before) {
					t.Fatalf("objects changed after a failed restore: %d -> %d", len(before), len(after))
				}
				head2, err := c.Recover(ctx)
				if err != nil || head2.Epoch() != 3 {
					t.Fatalf("head after failed restore = %v, %v; want epoch 3", head2.Epoch(), err)
				}
			})
		}
	}
}

// TestRetention: after 50 epochs with keep-last-5 only the files retained
// manifests reference remain, and every retained epoch restores.
func TestRetention(t *testing.T) {
	for _, b := range allBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			su, ku := b.urls(t)
			st, sink := open(t, su), open(t, ku)
			d := newDriver(5)
			d.keep = 5
			if err := d.run(ctx, t, d.committer(st, sink), 50); err != nil {
				t.Fatal(err)
			}
			objs, err := st.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			// _latest.json + 1 generation + 5 manifests + 5 epochs x 2 state files.
			if want := 1 + 1 + 5 + 5*d.parallelism; len(objs) != want {
				var keys []string
				for _, o := range objs {
					keys = append(keys, o.Key)
				}
				t.Fatalf("objects after retention = %d, want %d:\n%s", len(objs), want, strings.Join(keys, "\n"))
			}
			c := d.committer(st, sink)
			head, err := c.Recover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			chain, err := c.Chain(ctx, head, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(chain) != 5 || chain[4].Epoch != 46 {
				t.Fatalf("retained chain has %d manifests ending at %d, want 5 ending at 46", len(chain), chain[len(chain)-1].Epoch)
			}
			for _, m := range chain {
				if _, err := restore(ctx, c, &epoch.Head{Manifest: m}); err != nil {
					t.Fatalf("restore of retained epoch %d: %v", m.Epoch, err)
				}
			}
			// Outputs are the product: never deleted by retention.
			souts, _ := sink.List(ctx, "")
			if len(souts) != 50 {
				t.Fatalf("sink holds %d outputs, want 50", len(souts))
			}
		})
	}
}

// TestThrottling: 10% of calls fail as 503 SlowDown would; with retries every
// epoch still commits, and the committed state equals an uninterrupted run.
func TestThrottling(t *testing.T) {
	for _, b := range allBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			want, _ := reference(t, b, 11, 20)
			su, ku := b.urls(t)
			st, sink := open(t, su), open(t, ku)
			f := store.NewFaulty(st, store.FaultPlan{Throttle: store.Throttle{P: 0.10, Seed: 42}})
			r := store.WithRetry(f, store.RetryPolicy{MaxAttempts: 8, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, Seed: 1})
			d := newDriver(11)
			if err := d.run(ctx, t, d.committer(r, sink), 20); err != nil {
				t.Fatalf("throttled run: %v", err)
			}
			if r.Retries() == 0 {
				t.Fatal("no retries counted under 10% throttling")
			}
			t.Logf("%d calls, %d retries", f.Calls(), r.Retries())
			if got := takeSnapshot(ctx, t, st, sink, d.keep); !reflect.DeepEqual(got, want) {
				t.Fatalf("throttled state differs\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestFencedInProcess: two writers from the same head; the second is fenced
// and the pointer keeps the first's epoch.
func TestFencedInProcess(t *testing.T) {
	ctx := ctxT(t)
	b := fileBackend()
	su, ku := b.urls(t)
	st, sink := open(t, su), open(t, ku)
	d := newDriver(1)
	if err := d.run(ctx, t, d.committer(st, sink), 1); err != nil {
		t.Fatal(err)
	}
	c := d.committer(st, sink)
	h1, err := c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := c.Recover(ctx)
	a1, a2 := c.Begin(h1, h1.Manifest.Generation), c.Begin(h2, h2.Manifest.Generation)
	if _, err := a1.Commit(ctx, &manifest.Manifest{Watermark: manifest.NoWatermark}); err != nil {
		t.Fatal(err)
	}
	_, err = a2.Commit(ctx, &manifest.Manifest{Watermark: manifest.NoWatermark})
	if !errors.Is(err, epoch.ErrFenced) || !strings.Contains(err.Error(), "another writer committed epoch 2") {
		t.Fatalf("second writer: %v, want ErrFenced naming epoch 2", err)
	}
	h3, _ := c.Recover(ctx)
	if h3.Manifest.Attempt != a1.ID {
		t.Fatalf("head attempt %s, want the first writer's %s", h3.Manifest.Attempt, a1.ID)
	}
}

// BenchmarkCommit measures the commit path: object-store calls and bytes per
// epoch (two subtasks, one output file, retention after every commit).
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	st, sink := open(b, "file://"+dir+"/state"), open(b, "file://"+dir+"/sink")
	cs := &countingStore{Store: st}
	d := newDriver(1)
	c := d.committer(cs, sink)
	if err := d.run(ctx, b, c, 1); err != nil {
		b.Fatal(err)
	}
	cs.reset()
	b.ResetTimer()
	if err := d.run(ctx, b, c, int64(1+b.N)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	n := float64(b.N)
	// One run: Recover (get latest, get manifest, probe next manifest, probe
	// next generation), Retain, then per epoch the writes below.
	b.ReportMetric(float64(cs.puts)/n, "puts/epoch")
	b.ReportMetric(float64(cs.gets)/n, "gets/epoch")
	b.ReportMetric(float64(cs.lists+cs.deletes)/n, "gc-calls/epoch")
	b.ReportMetric(float64(cs.bytes)/n, "bytes/epoch")
}

// TestAmbiguousWrites: one call fails without applying, or applies and then
// loses its answer (a timeout after the server acted), at every call index.
// The writer keeps going (store retries, unknown commit outcomes resolved by
// reading back) and commits exactly what an uninterrupted run commits.
func TestAmbiguousWrites(t *testing.T) {
	const epochs = 3
	for _, b := range allBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			want, calls := reference(t, b, 4, epochs)
			for _, mode := range []store.FaultMode{store.Fail, store.FailAfterApply} {
				for at := 0; at < calls; at++ {
					ctx := ctxT(t)
					su, ku := b.urls(t)
					st, sink := open(t, su), open(t, ku)
					f := store.NewFaulty(st, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: mode}}})
					r := store.WithRetry(f, store.RetryPolicy{BaseDelay: time.Microsecond, Seed: 1})
					d := newDriver(4)
					if err := d.run(ctx, t, d.committer(r, sink), epochs); err != nil {
						t.Fatalf("%s at %d (%s): %v", mode, at, f.Log()[min(at, len(f.Log())-1)], err)
					}
					if got := takeSnapshot(ctx, t, st, sink, d.keep); !reflect.DeepEqual(got, want) {
						t.Fatalf("%s at %d: state differs\n got %+v\nwant %+v", mode, at, got, want)
					}
				}
			}
		})
	}
}
