package operators

import (
	"bufio"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/keygroup"
)

var update = flag.Bool("update", false, "rewrite testdata/keygroups_k128.txt (only when the key encoding is meant to change: it never is)")

func TestKeyGroupMatchesStdlibFNV(t *testing.T) {
	for _, s := range []string{"", "a", "user-1", strings.Repeat("xyz", 100)} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := keygroup.Of([]byte(s), 1000), int(h.Sum64()%1000); got != want {
			t.Errorf("keygroup.Of(%q, 1000) = %d, want %d", s, got, want)
		}
	}
}

// pinnedKeys returns the pinned keys: a description and the encoded key.
func pinnedKeys(t *testing.T) [][2]string {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "ts", Type: eventTimeType, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	n := 0
	add := func(s string, i int64, bl bool, f float64, i32 int32, ts int64, nullAll bool) {
		n++
		if nullAll {
			for c := range 6 {
				b.Field(c).AppendNull()
			}
			return
		}
		b.Field(0).(*array.StringBuilder).Append(s)
		b.Field(1).(*array.Int64Builder).Append(i)
		b.Field(2).(*array.BooleanBuilder).Append(bl)
		b.Field(3).(*array.Float64Builder).Append(f)
		b.Field(4).(*array.Int32Builder).Append(i32)
		b.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
	}
	for i := range 100 {
		add(fmt.Sprintf("user-%d", i), int64(i), i%2 == 0, float64(i)/4, int32(-i), int64(i)*60_000_000, false)
	}
	add("", math.MinInt64, false, math.Inf(-1), math.MinInt32, math.MinInt64, false)
	add("ü", math.MaxInt64, true, math.NaN(), math.MaxInt32, math.MaxInt64, false)
	add("", 0, false, 0, 0, 0, true)
	rec := b.NewRecordBatch()
	defer rec.Release()
	var out [][2]string
	for r := range n {
		for _, kc := range []struct {
			name string
			cols []int
		}{{"s", []int{0}}, {"i", []int{1}}} {
			out = append(out, [2]string{fmt.Sprintf("%s=%s", kc.name, cellKey(rec, r, kc.cols)), string(SerializeKey(nil, rec, r, kc.cols))})
		}
		if r%10 == 0 || r >= 100 {
			cols := []int{0, 1, 2, 3, 4, 5}
			out = append(out, [2]string{"all=" + cellKey(rec, r, cols), string(SerializeKey(nil, rec, r, cols))})
		}
	}
	return out
}

func cellKey(rec arrow.RecordBatch, r int, cols []int) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = cell(rec.Column(c), r)
	}
	return strings.Join(parts, ",")
}

// TestKeyGroupTable pins the key encoding and key-group assignment: it must
// never change, or restored state lands in the wrong subtask.
func TestKeyGroupTable(t *testing.T) {
	path := filepath.Join("testdata", "keygroups_k128.txt")
	var lines []string
	for _, kv := range pinnedKeys(t) {
		lines = append(lines, fmt.Sprintf("%s\t%x\t%d", kv[0], kv[1], keygroup.Of([]byte(kv[1]), 128)))
	}
	if *update {
		body := "# description\tkey bytes (hex)\tkey group (K=128). Generated once; never regenerate.\n" + strings.Join(lines, "\n") + "\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); !strings.HasPrefix(l, "#") && l != "" {
			want = append(want, l)
		}
	}
	if len(want) < 200 {
		t.Fatalf("%s has %d entries, want >= 200", path, len(want))
	}
	eqLines(t, "key groups", lines, want)
}

func TestKeyGroupRangeMatchesSubtaskOf(t *testing.T) {
	check := func(k, p int) {
		next := 0
		for s := range p {
			lo, hi := keygroup.Range(s, p, k)
			if lo != next {
				t.Fatalf("k=%d p=%d s=%d: lo=%d, want %d (ranges must tile [0,k))", k, p, s, lo, next)
			}
			for kg := lo; kg < hi; kg++ {
				if got := keygroup.SubtaskOf(kg, p, k); got != s {
					t.Fatalf("k=%d p=%d kg=%d: SubtaskOf=%d, range says %d", k, p, kg, got, s)
				}
			}
			next = hi
		}
		if next != k {
			t.Fatalf("k=%d p=%d: ranges end at %d", k, p, next)
		}
	}
	for p := 1; p <= 128; p++ {
		check(128, p)
	}
	for _, p := range []int{1, 2, 3, 7, 100, 127, 1000, 4099, 32767, 32768} {
		check(32768, p)
	}
	if lo, hi := keygroup.Range(3, 3, 128); lo != 0 || hi != 0 {
		t.Errorf("out-of-range subtask: [%d,%d)", lo, hi)
	}
}

func TestSerializeKey(t *testing.T) {
	rec := batch(t,
		ev{ts: 1, user: sp("ab"), s: sp("c"), f: fp(0)},
		ev{ts: 1, user: sp("a"), s: sp("bc"), f: fp(math.Copysign(0, -1))},
		ev{ts: 1, user: nil, s: sp(""), f: fp(math.NaN())},
		ev{ts: 1, user: sp(""), s: nil, f: fp(-math.NaN())},
	)
	defer rec.Release()
	k := func(r int, cols ...int) string { return string(SerializeKey(nil, rec, r, cols)) }
	if k(0, 1, 4) == k(1, 1, 4) {
		t.Error(`("ab","c") and ("a","bc") encode the same`)
	}
	if k(2, 1, 4) == k(3, 1, 4) {
		t.Error(`(null,"") and ("",null) encode the same`)
	}
	if k(0, 3) != k(1, 3) {
		t.Error("0 and -0 encode differently")
	}
	if k(2, 3) != k(3, 3) {
		t.Error("NaNs encode differently")
	}
	if got, want := fmt.Sprintf("%x", k(0, 1, 2)), "0402616200"; got != want {
		t.Errorf(`("ab", null) = %s, want %s`, got, want)
	}
	// Round trip through decodeKey.
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for r := range 4 {
		cols := []int{0, 1, 2, 3, 4, 5}
		if err := decodeKey(k(r, cols...), b.Fields()); err != nil {
			t.Fatal(err)
		}
	}
	out := b.NewRecordBatch()
	defer out.Release()
	got, want := rowsOf(out), rowsOf(rec)
	want[1] = strings.Replace(want[1], "-0", "0", 1) // -0 is canonicalised
	eqLines(t, "decoded keys", got, want)
	if err := decodeKey(k(0, 1)[:2], b.Fields()[1:2]); err == nil {
		t.Error("truncated key decoded without error")
	}
}

func TestPartitionIndices(t *testing.T) {
	var rows []ev
	for i := range 1000 {
		rows = append(rows, ev{ts: int64(i), user: sp("user-" + strconv.Itoa(i%37)), n: ip(int64(i))})
	}
	rec := batch(t, rows...)
	defer rec.Release()
	for _, p := range []int{1, 2, 3, 7} {
		sels, err := PartitionIndices(rec, []int{1}, p, 128)
		if err != nil {
			t.Fatal(err)
		}
		if len(sels) != p {
			t.Fatalf("p=%d: %d selections", p, len(sels))
		}
		total := 0
		for s, sel := range sels {
			if sel == nil {
				t.Fatalf("p=%d: selection %d is nil (nil means every row)", p, s)
			}
			last := int32(-1)
			for _, i := range sel {
				kg := keygroup.Of(SerializeKey(nil, rec, int(i), []int{1}), 128)
				if got := keygroup.SubtaskOf(kg, p, 128); got != s {
					t.Fatalf("p=%d: row with key group %d in selection %d, want %d", p, kg, s, got)
				}
				if lo, hi := keygroup.Range(s, p, 128); kg < lo || kg >= hi {
					t.Fatalf("p=%d: key group %d outside subtask %d's range [%d,%d)", p, kg, s, lo, hi)
				}
				if i <= last {
					t.Fatalf("p=%d selection %d: order not preserved", p, s)
				}
				last = i
			}
			total += len(sel)
		}
		if total != 1000 {
			t.Fatalf("p=%d: %d rows after partition, want 1000", p, total)
		}
	}
	empty := rec.NewSlice(0, 0)
	defer empty.Release()
	sels, err := PartitionIndices(empty, []int{1}, 3, 128)
	if err != nil || len(sels) != 3 || sels[0] == nil || len(sels[0]) != 0 {
		t.Errorf("empty batch: %v, %v; want 3 empty non-nil selections", sels, err)
	}
	for _, tc := range []struct {
		cols []int
		p, k int
	}{{[]int{9}, 2, 128}, {[]int{1}, 0, 128}, {[]int{1}, 200, 128}, {[]int{1}, 1, 0}, {[]int{1}, 1, keygroup.Max + 1}} {
		if _, err := PartitionIndices(rec, tc.cols, tc.p, tc.k); err == nil {
			t.Errorf("PartitionIndices(cols=%v, p=%d, k=%d): no error", tc.cols, tc.p, tc.k)
		}
	}
	if _, err := PartitionIndices(nil, []int{1}, 1, 128); err == nil {
		t.Error("PartitionIndices(nil): no error")
	}
}
