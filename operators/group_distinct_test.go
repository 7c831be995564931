package operators

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestDistinctAccMatchesMaps drives count_distinct's accumulator with random
// updates, merges and resets over slots whose sets grow past the small list
// into tables, with values long enough that released ones force arena
// compaction, and checks every count and every state row against sets of Go
// strings.
func TestDistinctAccMatchesMaps(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	const nslots, nvals = 40, 3000
	pool := make([]string, nvals)
	for i := range pool {
		pool[i] = fmt.Sprintf("v%d-%s", i, strings.Repeat("x", rng.IntN(2000)))
	}
	a := newDistinctAcc(tagString)
	a.grow(nslots)
	ref := make([]map[string]bool, nslots)
	for i := range ref {
		ref[i] = map[string]bool{}
	}
	enc := func(s string) string {
		rec := strBatch(t, s)
		defer rec.Release()
		return string(SerializeKey(nil, rec, 0, []int{0}))
	}
	encoded := map[string]string{}
	for _, v := range pool {
		encoded[v] = enc(v)
	}
	check := func(step int) {
		t.Helper()
		check1(t, a, step, nslots, ref, encoded)
		// A few slots hold fewer values than the dictionary: appendState
		// then sorts each slot's values by their bytes, not by rank.
		check1(t, a, step, 3, ref, encoded)
	}
	var compactions int
	for step := range 4000 {
		s := int32(rng.IntN(nslots))
		switch op := rng.IntN(12); {
		case op == 0:
			dead := a.dict.dead
			a.reset(s)
			clear(ref[s])
			if a.dict.dead < dead {
				compactions++
			}
		case op == 1:
			src := int32(rng.IntN(nslots))
			a.merge(s, src)
			for v := range ref[src] {
				ref[s][v] = true
			}
		default:
			n := 1 + rng.IntN(30)
			for range n {
				v := pool[rng.IntN(1+rng.IntN(nvals))]
				a.add(s, []byte(encoded[v]))
				ref[s][v] = true
			}
		}
		if step%250 == 0 {
			check(step)
		}
	}
	check(-1)
	// Reset the slots one by one, checking the rest: releasing most values
	// must compact the arena on the way.
	for s := range int32(nslots) {
		dead := a.dict.dead
		a.reset(s)
		clear(ref[s])
		if a.dict.dead < dead {
			compactions++
		}
		if s == nslots/2 || s == 3*nslots/4 {
			check(int(-s))
		}
	}
	if compactions == 0 {
		t.Errorf("the arena was never compacted (live %d dead %d bytes): the test misses that path", a.dict.live, a.dict.dead)
	}
	if a.dict.n != 0 || a.dict.live != 0 {
		t.Errorf("after resetting every slot the dictionary holds %d values, %d bytes", a.dict.n, a.dict.live)
	}
}

func strBatch(t *testing.T, s string) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil))
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(s)
	return b.NewRecordBatch()
}

// check1 compares the results and state of a's first nslots slots with ref.
func check1(t *testing.T, a *distinctAcc, step, nslots int, ref []map[string]bool, encoded map[string]string) {
	t.Helper()
	slots := make([]int32, nslots)
	for i := range slots {
		slots[i] = int32(i)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	if err := a.appendResults(b, slots); err != nil {
		t.Fatal(err)
	}
	counts := b.NewInt64Array()
	defer counts.Release()
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	defer lb.Release()
	if err := a.appendState([]array.Builder{lb}, slots); err != nil {
		t.Fatal(err)
	}
	st := lb.NewListArray()
	defer st.Release()
	vals := st.ListValues().(*array.Binary)
	for s := range nslots {
		if got, want := counts.Value(s), int64(len(ref[s])); got != want {
			t.Fatalf("step %d slot %d: count %d, want %d", step, s, got, want)
		}
		var want []string
		for v := range ref[s] {
			want = append(want, encoded[v])
		}
		slices.Sort(want)
		lo, hi := st.ValueOffsets(s)
		var got []string
		for i := lo; i < hi; i++ {
			got = append(got, string(vals.Value(int(i))))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d slot %d: state has %d values, want %d (or different ones)", step, s, len(got), len(want))
		}
	}
}
