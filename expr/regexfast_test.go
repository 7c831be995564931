package expr

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestRxFastPath checks the literal fast path is taken where it should be.
func TestRxFastPath(t *testing.T) {
	for _, c := range []struct {
		pattern string
		lit     string
		before  int
		mid     bool
	}{
		{`(&|^)channel_id=([^&]*)`, "channel_id=", 1, true},
		{`channel_id=(\d+)`, "channel_id=", 0, false},
		{`a.{2,3}bc`, "bc", 1 + 3*4, false}, // Simplify splits the literal "abc"
		{`x*abc`, "abc", -1, false},         // unbounded before: prefilter only
		{`\bid=(\d+)`, "id=", -1, false},    // \b looks back: prefilter only
		{`(?i)abc`, "", -1, false},          // folded case: no literal
		{`[a-z]+`, "", -1, false},
	} {
		r, err := compileRx(c.pattern)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		if r.lit != c.lit || r.before != c.before || (r.mid != nil) != c.mid {
			t.Errorf("%s: lit %q before %d mid %v; want %q %d %v", c.pattern, r.lit, r.before, r.mid != nil, c.lit, c.before, c.mid)
		}
	}
}

// TestRxEqualsRegexp compares rx with regexp on random texts built from the
// patterns' own pieces, so matches, near misses and repeated literals all
// occur.
func TestRxEqualsRegexp(t *testing.T) {
	patterns := []string{
		`(&|^)channel_id=([^&]*)`,
		`(?:^|&)channel_id=([^&]*)$`,
		`(a|bb)?id=(\d*)`,
		`^id=(\d+)`,
		`(x|^|\n)id=(\d+)(&|$)`,
		`.{0,3}id=`,
		`[^&]{2}id=([0-9]+)`,
		`x*id=(.)`,
		`\bid=(\d+)`,
		`(?m)^id=(\d+)`,
		`(?s).id=(.)`,
		`é?id=(\d)`,
		`(?i)x?ID=(\d)`,
		`ab|id=(\d)`,
		// ^ before the literal with flags, non-greedy and named groups after it: the
		// suffix regexp is printed and compiled again, so they must survive.
		`(^|&)id=(?i:A|bb)?(.*?)(&|$)`,
		`(^|x)id=(?s:.)+?(?P<tail>\d*)`,
		`(?U)(^|&)id=(\d+)`,
		`(?i:x?)(^|&)id=([^&]*)`,
	}
	pieces := []string{"id=", "channel_", "channel_id=", "&", "^", "a", "A", "bb", "BB", "x", "X", "1", "23", "\n", "é", "ID=", " ", "$", "q=7"}
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", "id=", "&channel_id=", "channel_id=5", "xchannel_id=1&channel_id=2"}
	for range 3000 {
		var b strings.Builder
		for range rng.IntN(9) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		r, err := compileRx(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.NumSubexp() != re.NumSubexp() {
			t.Fatalf("%s: %d groups, want %d", p, r.NumSubexp(), re.NumSubexp())
		}
		for _, s := range texts {
			if got, want := r.MatchString(s), re.MatchString(s); got != want {
				t.Fatalf("%s on %q: match %v, want %v", p, s, got, want)
			}
			if got, want := r.FindStringSubmatchIndex(s), re.FindStringSubmatchIndex(s); !slices.Equal(got, want) {
				t.Fatalf("%s on %q: submatches %v, want %v", p, s, got, want)
			}
		}
	}
}

// TestRegexpExtractFastPathRows runs regexp_extract through the expression
// API on rows where the literal is absent, first, late and repeated.
func TestRegexpExtractFastPathRows(t *testing.T) {
	urls := []string{
		"https://www.nexmark.com/a/b/item.htm?query=1",
		"https://www.nexmark.com/a/b/item.htm?query=1&channel_id=42",
		"channel_id=7&x=1",
		"https://x/?xchannel_id=1&channel_id=2",
		"https://x/?channel_id=&channel_id=3", // the first is after '?', not '&'
		"https://x/?a=1&channel_id=&b=2",
	}
	want := []any{nil, "42", "7", "2", "3", ""}
	got := evalStrings(t, `regexp_extract(url, '(&|^)channel_id=([^&]*)', 2)`, urls)
	if !equalValues(got, want) {
		t.Fatalf("regexp_extract: got %v, want %v", got, want)
	}
}

// evalStrings evaluates src over one string column url holding vals.
func evalStrings(t *testing.T, src string, vals []string) []any {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "url", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewStringBuilder(mem)
	b.AppendValues(vals, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(vals)))
	col.Release()
	defer rec.Release()
	e, err := Compile(src, schema)
	if err != nil {
		t.Fatalf("Compile %s: %v", src, err)
	}
	arr, err := e.Eval(rec, mem)
	if err != nil {
		t.Fatalf("Eval %s: %v", src, err)
	}
	defer arr.Release()
	return values(t, arr)
}

// BenchmarkRx compares the literal fast path with plain regexp on
// Nexmark-like URLs (half without the literal).
func BenchmarkRx(b *testing.B) {
	const p = `(&|^)channel_id=([^&]*)`
	urls := []string{
		"https://www.nexmark.com/qvqx/vbvl/item.htm?query=1",
		"https://www.nexmark.com/hnkd/xzla/item.htm?query=1&channel_id=1879048192",
	}
	r, err := compileRx(p)
	if err != nil {
		b.Fatal(err)
	}
	re := regexp.MustCompile(p)
	b.Run("rx", func(b *testing.B) {
		for i := range b.N {
			r.FindStringSubmatchIndex(urls[i&1])
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for i := range b.N {
			re.FindStringSubmatchIndex(urls[i&1])
		}
	})
}
