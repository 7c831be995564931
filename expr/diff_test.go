package expr

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	exprlang "github.com/expr-lang/expr"
)

// gen builds random well-typed expressions over i1, i2 (int64), f1 (float64),
// s1, s2 (string) in the subset both engines define identically (no zero
// divisors: there expr-lang fails or gives Inf where floe gives null).
type gen struct{ r *rand.Rand }

func (g *gen) num(depth int) (string, bool) { // returns src, isInt
	if depth <= 0 || g.r.IntN(4) == 0 {
		switch g.r.IntN(6) {
		case 0:
			return "i1", true
		case 1:
			return "i2", true
		case 2:
			return "f1", false
		case 3:
			return strconv.Itoa(1 + g.r.IntN(9)), true
		case 4:
			return strconv.FormatFloat(float64(g.r.IntN(40))/4+0.25, 'f', -1, 64), false
		default:
			return "len(" + g.str(depth-1) + ")", true
		}
	}
	a, ai := g.num(depth - 1)
	b, bi := g.num(depth - 1)
	switch g.r.IntN(8) {
	case 0:
		return "(" + a + " + " + b + ")", ai && bi
	case 1:
		return "(" + a + " - " + b + ")", ai && bi
	case 2:
		return "(" + a + " * " + b + ")", ai && bi
	case 3: // divisors are never zero: null on zero division is tested in TestEval
		return "(" + a + " / (abs(" + b + ") + 1))", false
	case 4:
		if ai && bi {
			return "(" + a + " % (abs(" + b + ") + 1))", true
		}
		return "(" + a + " + " + b + ")", false
	case 5:
		return "abs(" + a + ")", ai
	case 6:
		return "(-" + a + ")", ai
	default:
		return a, ai
	}
}

func (g *gen) str(depth int) string {
	if depth <= 0 || g.r.IntN(3) == 0 {
		switch g.r.IntN(4) {
		case 0:
			return "s1"
		case 1:
			return "s2"
		default:
			return strconv.Quote(words[g.r.IntN(len(words))])
		}
	}
	switch g.r.IntN(3) {
	case 0:
		return "lower(" + g.str(depth-1) + ")"
	case 1:
		return "upper(" + g.str(depth-1) + ")"
	default:
		return "(" + g.str(depth-1) + " + " + g.str(depth-1) + ")"
	}
}

func (g *gen) boolean(depth int) string {
	cmps := []string{"==", "!=", "<", "<=", ">", ">="}
	if depth <= 0 || g.r.IntN(3) == 0 {
		switch g.r.IntN(6) {
		case 0, 1:
			a, _ := g.num(depth - 1)
			b, _ := g.num(depth - 1)
			return "(" + a + " " + cmps[g.r.IntN(len(cmps))] + " " + b + ")"
		case 2:
			return "(" + g.str(depth-1) + " " + cmps[g.r.IntN(len(cmps))] + " " + g.str(depth-1) + ")"
		case 3:
			ops := []string{"contains", "startsWith", "endsWith", "not contains"}
			return "(" + g.str(depth-1) + " " + ops[g.r.IntN(len(ops))] + " " + g.str(0) + ")"
		case 4:
			a, _ := g.num(depth - 1)
			return "(" + a + " in [1, 2.5, 3, -4])"
		default:
			pats := []string{`'^a'`, `'b$'`, `'[é]'`, `'^$'`}
			return "(" + g.str(depth-1) + " matches " + pats[g.r.IntN(len(pats))] + ")"
		}
	}
	switch g.r.IntN(3) {
	case 0:
		return "(" + g.boolean(depth-1) + " and " + g.boolean(depth-1) + ")"
	case 1:
		return "(" + g.boolean(depth-1) + " or " + g.boolean(depth-1) + ")"
	default:
		return "not " + g.boolean(depth-1)
	}
}

var words = []string{"", "a", "ab", "Ba", "héllo", "home", "b"}

// TestDifferential checks Eval against expr-lang's own VM (expr.Run per row)
// on random null-free data.
func TestDifferential(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	g := &gen{r: r}
	const rows = 200
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i1", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i2", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f1", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s1", Type: arrow.BinaryTypes.String},
		{Name: "s2", Type: arrow.BinaryTypes.String},
	}, nil)
	mem := memory.NewGoAllocator()
	bld := array.NewRecordBuilder(mem, schema)
	defer bld.Release()
	envs := make([]map[string]any, rows)
	floats := []float64{0, -0.5, 1, 2.25, -3, 1e9, 0.1}
	for i := range envs {
		i1, i2 := int64(r.IntN(21)-10), int64(r.IntN(21)-10)
		f1 := floats[r.IntN(len(floats))]
		s1, s2 := words[r.IntN(len(words))], words[r.IntN(len(words))]
		bld.Field(0).(*array.Int64Builder).Append(i1)
		bld.Field(1).(*array.Int64Builder).Append(i2)
		bld.Field(2).(*array.Float64Builder).Append(f1)
		bld.Field(3).(*array.StringBuilder).Append(s1)
		bld.Field(4).(*array.StringBuilder).Append(s2)
		envs[i] = map[string]any{"i1": int(i1), "i2": int(i2), "f1": f1, "s1": s1, "s2": s2}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()

	n := 400
	if testing.Short() {
		n = 100
	}
	skipped := 0
	for k := 0; k < n; k++ {
		var src string
		switch k % 3 {
		case 0:
			src = g.boolean(3)
		case 1:
			src, _ = g.num(3)
		default:
			src = g.str(3)
		}
		prog, err := exprlang.Compile(src, exprlang.Env(envs[0]))
		if err != nil { // e.g. expr-lang folds a constant 1 % 0 at compile time
			skipped++
			continue
		}
		e, err := Compile(src, schema)
		if err != nil {
			t.Fatalf("Compile(%s): %v", src, err)
		}
		arr, err := e.Eval(rec, mem)
		if err != nil {
			t.Fatalf("Eval(%s): %v", src, err)
		}
		for i, env := range envs {
			want, werr := exprlang.Run(prog, env)
			if arr.IsNull(i) {
				t.Fatalf("%s row %d (%v): got null, expr-lang %v, %v", src, i, env, want, werr)
			}
			if werr != nil {
				t.Fatalf("%s row %d (%v): got %v, expr-lang error %v", src, i, env, arr.ValueStr(i), werr)
			}
			if !sameValue(arr, i, want) {
				t.Fatalf("%s row %d (%v): got %s, expr-lang %v (%T)", src, i, env, arr.ValueStr(i), want, want)
			}
		}
		arr.Release()
	}
	t.Logf("%d expressions, %d rejected by expr-lang's compiler", n, skipped)
	if skipped > n/10 {
		t.Fatalf("expr-lang rejected %d of %d generated expressions", skipped, n)
	}
}

func sameValue(arr arrow.Array, i int, want any) bool {
	switch a := arr.(type) {
	case *array.Int64:
		w, ok := want.(int)
		return ok && a.Value(i) == int64(w)
	case *array.Float64:
		var w float64
		switch x := want.(type) {
		case float64:
			w = x
		case int:
			w = float64(x)
		default:
			return false
		}
		g := a.Value(i)
		return g == w || (math.IsNaN(g) && math.IsNaN(w))
	case *array.String:
		w, ok := want.(string)
		return ok && a.Value(i) == w
	case *array.Boolean:
		w, ok := want.(bool)
		return ok && a.Value(i) == w
	}
	panic(fmt.Sprintf("unexpected array %s", arr.DataType()))
}
