package epoch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// counter is the small stateful test operator: per key, the sum of values.
// Its state is Parquet (key_group, key, sum), one file per subtask.
type counter map[string]int64

const (
	testOp     = "counter"
	testMaxPar = 128
)

func keyGroup(key string) int {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(h.Sum64() % testMaxPar)
}

var stateSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key_group", Type: arrow.PrimitiveTypes.Int32},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "sum", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func encodeState(t testing.TB, c counter, lo, hi int) ([]byte, int64) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, stateSchema)
	defer b.Release()
	keys := slices.Sorted(maps.Keys(c))
	var n int64
	for _, k := range keys {
		kg := keyGroup(k)
		if kg < lo || kg >= hi {
			continue
		}
		b.Field(0).(*array.Int32Builder).Append(int32(kg))
		b.Field(1).(*array.StringBuilder).Append(k)
		b.Field(2).(*array.Int64Builder).Append(c[k])
		n++
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(stateSchema, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), n
}

func decodeState(data []byte, into counter) error {
	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), parquet.NewReaderProperties(memory.DefaultAllocator),
		pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 0)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		ks := rec.Column(1).(*array.String)
		ss := rec.Column(2).(*array.Int64)
		for i := 0; i < ks.Len(); i++ {
			into[ks.Value(i)] += ss.Value(i)
		}
	}
	return tr.Err()
}

// input returns the deterministic input of epoch e: 10 (key, value) pairs.
func input(seed uint64, e int64) [][2]any {
	r := rand.New(rand.NewPCG(seed, uint64(e)))
	out := make([][2]any, 10)
	for i := range out {
		out[i] = [2]any{fmt.Sprintf("k%02d", r.IntN(17)), int64(r.IntN(100))}
	}
	return out
}

// driver runs epochs of the test operator through the commit protocol.
type driver struct {
	seed        uint64
	parallelism int
	keep        int
	rng         *rand.Rand // attempt UUIDs
	// chainOnly: retention lists nothing (GCOptions.ChainOnly).
	chainOnly bool
}

func newDriver(seed uint64) *driver {
	return &driver{seed: seed, parallelism: 2, keep: 3, rng: rand.New(rand.NewPCG(seed, 99))}
}

func (d *driver) committer(st, sink store.Store) *epoch.Committer {
	c := epoch.NewCommitter(st, sink, "test", nil)
	c.NewAttempt = func() string {
		var b [16]byte
		for i := range b {
			b[i] = byte(d.rng.Uint32())
		}
		u, _ := uuid.FromBytes(b[:])
		u[6] = (u[6] & 0x0f) | 0x40
		u[8] = (u[8] & 0x3f) | 0x80
		return u.String()
	}
	c.Now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	return c
}

// restore loads the counter state of head, verifying every file.
func restore(ctx context.Context, c *epoch.Committer, head *epoch.Head) (counter, error) {
	st := counter{}
	if head.Manifest == nil {
		return st, nil
	}
	for _, op := range head.Manifest.Operators {
		for _, f := range op.Files {
			data, err := c.ReadFile(ctx, f)
			if err != nil {
				return nil, err
			}
			if err := decodeState(data, st); err != nil {
				return nil, fmt.Errorf("decode %s: %w", f.Path, err)
			}
		}
	}
	return st, nil
}

// run recovers and commits epochs until the head is at upTo.
func (d *driver) run(ctx context.Context, t testing.TB, c *epoch.Committer, upTo int64) error {
	head, err := c.Recover(ctx)
	if err != nil {
		return err
	}
	if _, err := c.Retain(ctx, head, epoch.GCOptions{Keep: d.keep, ChainOnly: d.chainOnly}); err != nil {
		return err
	}
	state, err := restore(ctx, c, head)
	if err != nil {
		return err
	}
	gen := head.Generation
	if gen == nil || gen.Parallelism != d.parallelism {
		gen, err = c.StartGeneration(ctx, head, manifest.Generation{
			Parallelism: d.parallelism, MaxParallelism: testMaxPar,
			Plan:     []manifest.OpPlan{{ID: testOp, Kind: "counter", StateSchema: "v1"}},
			PlanHash: "counter-v1",
		})
		if err != nil {
			return err
		}
	}
	for head.Epoch() < upTo {
		e := head.Epoch() + 1
		var out strings.Builder
		for _, kv := range input(d.seed, e) {
			state[kv[0].(string)] += kv[1].(int64)
			fmt.Fprintf(&out, "%s,%d\n", kv[0], kv[1])
		}
		att := c.Begin(head, gen.Generation)
		m := &manifest.Manifest{Watermark: e * 1000}
		m.Source.Inline = append(slices.Clone(prevInline(head)), fmt.Sprintf("in-%04d", e))
		m.Source.Count = int64(len(m.Source.Inline))
		op := manifest.OperatorState{ID: testOp, EmittedThrough: manifest.NoWatermark}
		for s := 0; s < d.parallelism; s++ {
			lo, hi := s*testMaxPar/d.parallelism, (s+1)*testMaxPar/d.parallelism
			data, rows := encodeState(t, state, lo, hi)
			ref, err := att.WriteState(ctx, testOp, s, lo, hi, data, rows)
			if err != nil {
				return err
			}
			op.Files = append(op.Files, ref)
		}
		m.Operators = []manifest.OperatorState{op}
		ref, err := att.WriteOutput(ctx, "", 0, "csv", []byte(out.String()), 10)
		if err != nil {
			return err
		}
		m.Outputs = []manifest.FileRef{ref}
		m.Counters.RowsIn = prevCounters(head).RowsIn + 10
		if head, err = att.Commit(ctx, m); err != nil {
			return err
		}
		if _, err := c.Retain(ctx, head, epoch.GCOptions{Keep: d.keep, ChainOnly: d.chainOnly}); err != nil {
			return err
		}
	}
	return nil
}

func prevInline(h *epoch.Head) []string {
	if h.Manifest == nil {
		return nil
	}
	return h.Manifest.Source.Inline
}

func prevCounters(h *epoch.Head) manifest.Counters {
	if h.Manifest == nil {
		return manifest.Counters{}
	}
	return h.Manifest.Counters
}

// snapshot is the committed state of a pipeline, independent of attempt IDs.
type snapshot struct {
	Epoch   int64
	Sources []string
	RowsIn  int64
	State   counter
	Outputs []string // contents of all committed outputs still in retention, in epoch order
}

func takeSnapshot(ctx context.Context, t testing.TB, st, sink store.Store, keep int) snapshot {
	t.Helper()
	c := epoch.NewCommitter(st, sink, "test", nil)
	head, err := c.Recover(ctx)
	if err != nil {
		t.Fatalf("recover for snapshot: %v", err)
	}
	state, err := restore(ctx, c, head)
	if err != nil {
		t.Fatalf("restore for snapshot: %v", err)
	}
	s := snapshot{Epoch: head.Epoch(), Sources: prevInline(head), RowsIn: prevCounters(head).RowsIn, State: state}
	chain, err := c.Chain(ctx, head, keep)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, o := range chain[i].Outputs {
			data, err := c.ReadOutput(ctx, o)
			if err != nil {
				t.Fatalf("read output: %v", err)
			}
			s.Outputs = append(s.Outputs, string(data))
		}
	}
	return s
}

func isCrash(err error) bool { return errors.Is(err, store.ErrCrashed) }
