package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/keygroup"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

func TestMain(m *testing.M) { s3test.Main(m) }

// backends returns the stores a test runs on: file:// and the real S3
// server, each a fresh empty root.
func backends(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"file": func(t *testing.T) store.Store { return open(t, "file://"+t.TempDir()) },
		"s3":   func(t *testing.T) store.Store { return open(t, s3test.Shared(t).NewBucket(t)) },
	}
}

func open(t testing.TB, url string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// S3 answers concurrent conditional writes of one key with 409
	// ConditionalRequestConflict: retried, as the engine's stores are.
	return store.WithRetry(s, store.RetryPolicy{MaxElapsed: 20 * time.Second})
}

// sim is a small pipeline run by W simulated workers (goroutines), each
// killed at random store calls and restarted with the same index, in the
// shape the engine will have: per epoch a decision; round 1 routes
// "key,value" rows by the key's group to the worker owning it, which adds
// them to its per-key totals (keyed stage "sum"); round 2 routes each
// changed key's epoch sum by the group of its bucket (the key's last
// digit) to the worker owning that, which adds it to per-bucket totals
// (stage "bucket") and writes the epoch's bucket deltas as an output file.
// State is one JSON file per stage and subtask, the manifest lists every
// worker's files; a worker restores its subtasks from the committed
// manifest.
type sim struct {
	st       store.Store
	topo     cluster.Topology
	epochs   int
	perEpoch int
	files    []cluster.File
	seed     uint64
	// incarnations counts worker runs; kills the crashes injected.
	incarnations, kills atomic.Int64
}

const simPipeline = "sim"

func (s *sim) input(t testing.TB, rng *rand.Rand) (wantKeys, wantBuckets map[string]int64) {
	wantKeys, wantBuckets = map[string]int64{}, map[string]int64{}
	ctx := context.Background()
	for i := range s.epochs * s.perEpoch {
		var b strings.Builder
		n := 1 + rng.IntN(40)
		for range n {
			k := fmt.Sprintf("k%03d", rng.IntN(300))
			v := int64(rng.IntN(100))
			fmt.Fprintf(&b, "%s,%d\n", k, v)
			wantKeys[k] += v
			wantBuckets["b"+k[len(k)-1:]] += v
		}
		key := fmt.Sprintf("src/f%04d.csv", i)
		if _, err := s.st.Put(ctx, key, []byte(b.String()), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		s.files = append(s.files, cluster.File{Key: key, Size: int64(b.Len())})
	}
	return wantKeys, wantBuckets
}

// run runs every worker until epoch s.epochs is committed.
func (s *sim) run(t testing.TB, killP float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, s.topo.Workers)
	for i := range s.topo.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s.seed, uint64(i)))
			for inc := 0; ; inc++ {
				st := store.Store(s.st)
				var f *store.Faulty
				wctx, cancelWorker := context.WithCancel(ctx)
				if inc < 8 && rng.Float64() < killP {
					// Killed at a random store call, before or after it
					// applies, or at a random instant (its context
					// cancelled, whatever it is doing).
					switch rng.IntN(3) {
					case 0:
						f = store.NewFaulty(s.st, store.FaultPlan{Faults: []store.Fault{{At: rng.IntN(120), Mode: store.CrashBefore}}})
					case 1:
						f = store.NewFaulty(s.st, store.FaultPlan{Faults: []store.Fault{{At: rng.IntN(120), Mode: store.CrashAfter}}})
					default:
						time.AfterFunc(time.Duration(rng.IntN(300))*time.Millisecond, cancelWorker)
					}
					if f != nil {
						st = f
					}
				}
				s.incarnations.Add(1)
				err := s.worker(wctx, i, st)
				killed := (f != nil && f.Crashed()) || (wctx.Err() != nil && ctx.Err() == nil && err != nil)
				cancelWorker()
				if killed {
					s.kills.Add(1)
					continue // killed: start the same index again
				}
				errs[i] = err
				return
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
}

func (s *sim) worker(ctx context.Context, idx int, st store.Store) error {
	w, err := cluster.New(cluster.Config{Store: st, Pipeline: simPipeline, Worker: idx, Topology: s.topo,
		Timeout: time.Minute, TakeOver: 300 * time.Millisecond, PollMin: 2 * time.Millisecond, PollMax: 40 * time.Millisecond})
	if err != nil {
		return err
	}
	head := 0
	for head < s.epochs {
		_, err := store.ReadRange(ctx, st, manifest.ManifestPath(1, int64(head+1)), 0, 1)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		head++
	}
	for e := head + 1; e <= s.epochs; e++ {
		var parent *manifest.Ref
		if e > 1 {
			parent = &manifest.Ref{Generation: 1, Epoch: int64(e - 1)}
		}
		ep, err := w.Join(ctx, 1, int64(e), parent, func(context.Context) (*manifest.Decision, error) {
			return &manifest.Decision{Files: cluster.AssignFiles(s.files[(e-1)*s.perEpoch:e*s.perEpoch], s.topo.Workers),
				Watermark: manifest.NoWatermark}, nil
		})
		if err != nil {
			return err
		}
		part, err := ep.Part(ctx)
		if err != nil {
			return err
		}
		if part == nil {
			err := s.process(ctx, st, ep, idx)
			if errors.Is(err, cluster.ErrCommitted) {
				continue
			}
			if err != nil {
				return err
			}
		}
		if _, _, err := ep.Commit(ctx, s.build(st)); err != nil {
			return err
		}
	}
	return nil
}

// kv is a row of the simulation: a key and a number.
type kv struct {
	K string
	V int64
}

func encodeRows(rows []kv) []byte {
	if len(rows) == 0 {
		return nil
	}
	var b bytes.Buffer
	for _, r := range rows {
		fmt.Fprintf(&b, "%s,%d\n", r.K, r.V)
	}
	return b.Bytes()
}

func decodeRows(data []byte) ([]kv, error) {
	var out []kv
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("bad row %q", line)
		}
		out = append(out, kv{k, n})
	}
	return out, nil
}

// exchange routes rows by the key group of route(row) and returns what this
// worker holds after the round: senders' rows in sender order, its own at
// its index.
func (s *sim) exchange(ctx context.Context, ep *cluster.Epoch, idx, round int, rows []kv) ([]kv, error) {
	segs := make([][]kv, s.topo.Workers)
	for _, r := range rows {
		to := s.topo.WorkerOfKeyGroup(keygroup.Of([]byte(r.K), s.topo.MaxParallelism))
		segs[to] = append(segs[to], r)
	}
	enc := make([][]byte, len(segs))
	for i, sg := range segs {
		if i != idx {
			enc[i] = encodeRows(sg)
		}
	}
	if _, err := ep.Send(ctx, round, enc, nil); err != nil {
		return nil, err
	}
	in, err := ep.Receive(ctx, round)
	if err != nil {
		return nil, err
	}
	var out []kv
	// Sender order with the local rows at idx.
	j := 0
	for sender := range s.topo.Workers {
		if sender == idx {
			out = append(out, segs[idx]...)
			continue
		}
		m := in[j]
		j++
		if m.Sender != sender {
			return nil, fmt.Errorf("round %d: incoming %d is sender %d", round, j-1, m.Sender)
		}
		rs, err := decodeRows(m.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// restore reads this worker's subtasks' state of stage op from the parent
// manifest.
func (s *sim) restore(ctx context.Context, st store.Store, parent *manifest.Manifest, op string, idx int) (map[string]int64, error) {
	state := map[string]int64{}
	if parent == nil {
		return state, nil
	}
	lo, hi := s.topo.Subtasks(idx)
	for _, o := range parent.Operators {
		if o.ID != op {
			continue
		}
		for _, f := range o.Files {
			if f.Subtask < lo || f.Subtask >= hi {
				continue
			}
			data, err := store.Read(ctx, st, f.Path)
			if err != nil {
				return nil, err
			}
			if err := manifest.VerifyFile(f, data); err != nil {
				return nil, err
			}
			var m map[string]int64
			if err := json.Unmarshal(data, &m); err != nil {
				return nil, err
			}
			for k, v := range m {
				state[k] = v
			}
		}
	}
	return state, nil
}

func readManifest(ctx context.Context, st store.Store, ref *manifest.Ref) (*manifest.Manifest, error) {
	if ref == nil {
		return nil, nil
	}
	key := manifest.ManifestPath(ref.Generation, ref.Epoch)
	data, _, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return manifest.DecodeManifest(key, data)
}

// putSame writes data create-if-absent; an existing object must hold the
// same bytes (the engine's Attempt.put rule).
func putSame(ctx context.Context, st store.Store, key string, data []byte) error {
	_, err := st.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
	if errors.Is(err, store.ErrPrecondition) {
		got, _, gerr := st.Get(ctx, key)
		if gerr != nil {
			return gerr
		}
		if !bytes.Equal(got, data) {
			return fmt.Errorf("%s exists with other bytes", key)
		}
		return nil
	}
	return err
}

func (s *sim) process(ctx context.Context, st store.Store, ep *cluster.Epoch, idx int) error {
	d := ep.Decision
	parent, err := readManifest(ctx, st, d.Parent)
	if err != nil {
		return err
	}
	sums, err := s.restore(ctx, st, parent, "sum", idx)
	if err != nil {
		return err
	}
	buckets, err := s.restore(ctx, st, parent, "bucket", idx)
	if err != nil {
		return err
	}
	var rows []kv
	var counters manifest.Counters
	for _, f := range cluster.FilesOf(d, idx) {
		data, err := store.Read(ctx, st, f.Key)
		if err != nil {
			return err
		}
		rs, err := decodeRows(data)
		if err != nil {
			return err
		}
		rows = append(rows, rs...)
		counters.FilesIn++
		counters.RowsIn += int64(len(rs))
	}
	// Round 1: rows to the owners of their keys; sum per key.
	mine, err := s.exchange(ctx, ep, idx, 1, rows)
	if err != nil {
		return err
	}
	changed := map[string]int64{}
	for _, r := range mine {
		sums[r.K] += r.V
		changed[r.K] += r.V
	}
	// Round 2: each changed key's epoch sum to the owner of its bucket.
	var deltas []kv
	for _, k := range slices.Sorted(mapsKeys(changed)) {
		deltas = append(deltas, kv{"b" + k[len(k)-1:], changed[k]})
	}
	mine, err = s.exchange(ctx, ep, idx, 2, deltas)
	if err != nil {
		return err
	}
	out := map[string]int64{}
	for _, r := range mine {
		buckets[r.K] += r.V
		out[r.K] += r.V
	}
	// State per subtask, output, part, after the fence (as the engine).
	if err := ep.Fence(ctx); err != nil {
		return err
	}
	part := &manifest.WorkerPart{Rounds: 2, Counters: counters}
	for _, op := range []struct {
		id    string
		state map[string]int64
	}{{"sum", sums}, {"bucket", buckets}} {
		o := manifest.OperatorState{ID: op.id, EmittedThrough: manifest.NoWatermark}
		lo, hi := s.topo.Subtasks(idx)
		for sub := lo; sub < hi; sub++ {
			klo, khi := keygroup.Range(sub, s.topo.Parallelism, s.topo.MaxParallelism)
			m := map[string]int64{}
			for k, v := range op.state {
				if g := keygroup.Of([]byte(k), s.topo.MaxParallelism); g >= klo && g < khi {
					m[k] = v
				}
			}
			data, _ := json.Marshal(m)
			key := manifest.StatePath(d.Generation, d.Epoch, d.Attempt, op.id, sub)
			if err := putSame(ctx, st, key, data); err != nil {
				return err
			}
			ref := manifest.NewFileRef(key, data)
			ref.Rows, ref.Subtask, ref.KeyGroupLo, ref.KeyGroupHi = int64(len(m)), sub, klo, khi
			o.Files = append(o.Files, ref)
		}
		part.Operators = append(part.Operators, o)
	}
	var outRows []kv
	for _, k := range slices.Sorted(mapsKeys(out)) {
		outRows = append(outRows, kv{k, out[k]})
	}
	if len(outRows) > 0 {
		lo, _ := s.topo.Subtasks(idx)
		name := manifest.OutputName(d.Generation, d.Epoch, lo, d.Attempt, "csv")
		data := encodeRows(outRows)
		if err := putSame(ctx, st, "out/"+name, data); err != nil {
			return err
		}
		ref := manifest.NewFileRef(name, data)
		ref.Rows, ref.Subtask = int64(len(outRows)), lo
		part.Outputs = append(part.Outputs, ref)
		part.Counters.RowsOut = int64(len(outRows))
	}
	_, err = ep.WritePart(ctx, part)
	return err
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// build is the deterministic manifest: the decision, the parts and the
// parent manifest only.
func (s *sim) build(st store.Store) cluster.Builder {
	return func(d *manifest.Decision, parts []*manifest.WorkerPart) ([]byte, error) {
		ctx := context.Background()
		parent, err := readManifest(ctx, st, d.Parent)
		if err != nil {
			return nil, err
		}
		merged, err := cluster.MergeParts(d, parts)
		if err != nil {
			return nil, err
		}
		m := &manifest.Manifest{FormatVersion: manifest.FormatVersion, Pipeline: d.Pipeline, Generation: d.Generation,
			Epoch: d.Epoch, Attempt: d.Attempt, Parent: d.Parent, CreatedAt: d.CreatedAt, Watermark: manifest.NoWatermark,
			Counters: merged.Counters, Operators: merged.Operators, Outputs: merged.Outputs, SideOutputs: merged.SideOutputs}
		if parent != nil {
			m.Source.Inline = slices.Clone(parent.Source.Inline)
			c, pc := &m.Counters, parent.Counters
			c.FilesIn += pc.FilesIn
			c.RowsIn += pc.RowsIn
			c.RowsOut += pc.RowsOut
		}
		for _, f := range d.Files {
			m.Source.Inline = append(m.Source.Inline, f.Key)
		}
		m.Source.Count = int64(len(m.Source.Inline))
		return manifest.EncodeManifest(m)
	}
}

// check verifies the committed pipeline: one manifest per epoch, each the
// child of the one before; the last one's state equal to the totals of all
// input; the committed outputs, each listed once, adding up to the bucket
// totals (a row received twice or lost would show); exactly W exchange
// objects per committed epoch and round, and no objects of other attempts'
// parts in a committed epoch.
func (s *sim) check(t *testing.T, wantKeys, wantBuckets map[string]int64) {
	ctx := context.Background()
	objs, err := s.st.List(ctx, "gen=")
	if err != nil {
		t.Fatal(err)
	}
	var last *manifest.Manifest
	gotOut := map[string]int64{}
	seenOut := map[string]bool{}
	for e := 1; e <= s.epochs; e++ {
		m, err := readManifest(ctx, s.st, &manifest.Ref{Generation: 1, Epoch: int64(e)})
		if err != nil {
			t.Fatalf("epoch %d: %v", e, err)
		}
		if e > 1 && (m.Parent == nil || m.Parent.Epoch != int64(e-1)) {
			t.Fatalf("epoch %d: parent %v", e, m.Parent)
		}
		for _, o := range m.Outputs {
			if seenOut[o.Path] {
				t.Fatalf("output %s listed twice", o.Path)
			}
			seenOut[o.Path] = true
			data, err := store.Read(ctx, s.st, "out/"+o.Path)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := decodeRows(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				gotOut[r.K] += r.V
			}
		}
		rounds := map[string]int{}
		for _, o := range objs {
			info, _ := manifest.ParseKey(o.Key)
			if info.Epoch != int64(e) || info.Attempt == "" {
				continue
			}
			if info.Attempt != m.Attempt {
				t.Errorf("epoch %d: %s belongs to attempt %s, the epoch has one attempt %s", e, o.Key, info.Attempt, m.Attempt)
			}
			if i := strings.Index(o.Key, "/x/r="); i >= 0 {
				rounds[o.Key[i+5:i+7]]++
			}
		}
		perRound := s.topo.Workers
		if perRound == 1 {
			perRound = 0 // one worker exchanges nothing
		}
		for _, r := range []string{"01", "02"} {
			if rounds[r] != perRound {
				t.Errorf("epoch %d round %s: %d exchange objects, want one per sender (%d)", e, r, rounds[r], s.topo.Workers)
			}
		}
		last = m
	}
	if _, _, err := s.st.Get(ctx, manifest.ManifestPath(1, int64(s.epochs+1))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a manifest past the last epoch: %v", err)
	}
	got := map[string]map[string]int64{"sum": {}, "bucket": {}}
	for _, o := range last.Operators {
		subs := map[int]bool{}
		for _, f := range o.Files {
			if subs[f.Subtask] {
				t.Fatalf("%s: subtask %d twice", o.ID, f.Subtask)
			}
			subs[f.Subtask] = true
			data, err := store.Read(ctx, s.st, f.Path)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]int64
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			for k, v := range m {
				got[o.ID][k] += v
			}
		}
		if len(subs) != s.topo.Parallelism {
			t.Errorf("%s: %d subtasks in the manifest, want %d", o.ID, len(subs), s.topo.Parallelism)
		}
	}
	if !mapsEqual(got["sum"], wantKeys) {
		t.Errorf("per-key totals differ from the input's:\n got %v\nwant %v", got["sum"], wantKeys)
	}
	if !mapsEqual(got["bucket"], wantBuckets) || !mapsEqual(gotOut, wantBuckets) {
		t.Errorf("bucket totals: state %v, outputs %v, want %v", got["bucket"], gotOut, wantBuckets)
	}
	if last.Counters.FilesIn != int64(len(s.files)) {
		t.Errorf("files_in %d, want %d", last.Counters.FilesIn, len(s.files))
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestSimulationKills runs 16 workers (P = 24, K = 128) over 6 epochs of
// two exchange rounds each, on file:// and on the real S3 server; each
// worker is killed in half of its first incarnations, at a random store
// call (before or after it applies) or at a random instant (its context
// cancelled), and started again with the same index.
// Every epoch commits exactly once, each round has exactly one object per
// sender, and state and outputs equal the totals of the input: no row lost
// or counted twice.
func TestSimulationKills(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			epochs := 6
			if name == "s3" {
				epochs = 3 // 16 workers of 2 rounds on one versitygw on 2 shared cores
			}
			s := &sim{st: mk(t), topo: cluster.Topology{Workers: 16, Parallelism: 24, MaxParallelism: 128},
				epochs: epochs, perEpoch: 20, seed: seed}
			wantKeys, wantBuckets := s.input(t, rand.New(rand.NewPCG(seed, 99)))
			s.run(t, 0.5)
			t.Logf("%d incarnations, %d killed", s.incarnations.Load(), s.kills.Load())
			if s.kills.Load() == 0 {
				t.Fatal("no worker was killed: the test tested nothing")
			}
			s.check(t, wantKeys, wantBuckets)
		})
	}
}

// TestSimulationNoKills is the same without kills at W = 3 and W = 1 (one
// worker: no exchange objects).
func TestSimulationNoKills(t *testing.T) {
	for _, w := range []int{1, 3} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			s := &sim{st: open(t, "file://"+t.TempDir()), topo: cluster.Topology{Workers: w, Parallelism: 4, MaxParallelism: 16},
				epochs: 3, perEpoch: 5, seed: 7}
			wantKeys, wantBuckets := s.input(t, rand.New(rand.NewPCG(7, 1)))
			s.run(t, 0)
			s.check(t, wantKeys, wantBuckets)
		})
	}
}
