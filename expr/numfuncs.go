package expr

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Rounding and conversion functions. Their results follow DuckDB's where the
// two can be compared (bench/expr_test.go checks them against DuckDB), except
// that a value with no result is null, never an error: a failing expression
// would fail the epoch, and every re-run of it.

// roundingFunc builds floor, ceil and trunc: the identity on int64 (so the
// result stays an exact int64) and math.Floor, Ceil or Trunc on float64.
func (c *compiler) roundingFunc(f fcall) (node, error) {
	x := f.xs[0]
	var fn func(float64) float64
	switch f.name {
	case "floor":
		fn = math.Floor
	case "ceil":
		fn = math.Ceil
	default:
		fn = math.Trunc
	}
	switch x.typ().k {
	case kInt:
		return x, nil
	case kFloat:
		return c.done(f.at, &unaryNode{x: x, t: tFloat, fn: func(in, out *vec) {
			for i, v := range in.f[:len(out.f)] {
				out.f[i] = fn(v)
			}
		}}, x)
	case kNull:
		return x, nil
	}
	return nil, c.errAt(f.args[0], "%s() argument 1 (x) needs a number, got %s", f.name, x.typ())
}

// roundFunc is round(x[, digits]): half away from zero, like DuckDB and
// PostgreSQL's round of a double (not banker's rounding). digits may be
// negative (round(1250, -2) = 1300) and must be a constant. An int64 stays
// int64 (rounded to a multiple of 10^-digits when digits < 0; null if that
// overflows); a float64 is computed as DuckDB does, round(x * 10^d) / 10^d,
// so round(2.675, 2) = 2.68 but round(1.005, 2) = 1 (1.005 is 1.00499999...
// in binary).
func (c *compiler) roundFunc(f fcall) (node, error) {
	x := f.xs[0]
	var d int64
	if len(f.xs) == 2 {
		n, null, err := c.constInt(f, 1, "digits")
		if err != nil {
			return nil, err
		}
		if null {
			return &constNode{v: nullConst(x.typ())}, nil
		}
		d = n
	}
	switch x.typ().k {
	case kInt:
		if d >= 0 {
			return x, nil
		}
		if d < -18 { // 10^19 > MaxInt64: every int64 rounds to 0
			return c.done(f.at, &unaryNode{x: x, t: tInt, fn: func(in, out *vec) {}}, x)
		}
		p := int64(1)
		for range -d {
			p *= 10
		}
		return c.done(f.at, &unaryNode{x: x, t: tInt, fn: func(in, out *vec) {
			overflow := false
			for i, v := range in.i[:len(out.i)] {
				r, ok := roundInt(v, p)
				out.i[i] = r
				overflow = overflow || !ok
			}
			if overflow {
				nullWhere(out, func(i int) bool { _, ok := roundInt(in.i[i], p); return !ok })
			}
		}}, x)
	case kFloat:
		return c.done(f.at, &unaryNode{x: x, t: tFloat, fn: func(in, out *vec) {
			for i, v := range in.f[:len(out.f)] {
				out.f[i] = roundFloat(v, d)
			}
		}}, x)
	case kNull:
		return x, nil
	}
	return nil, c.errAt(f.args[0], "round() argument 1 (x) needs a number, got %s", x.typ())
}

// roundInt rounds v to a multiple of p, half away from zero; ok is false when
// the result does not fit in int64.
func roundInt(v, p int64) (int64, bool) {
	q, r := v/p, v%p
	if r < 0 {
		r = -r
	}
	if r >= p-r { // r*2 >= p without overflow
		if v < 0 {
			q--
		} else {
			q++
		}
	}
	out, over := mulInt(q, p)
	return out, !over
}

// roundFloat is DuckDB's round(double, precision).
func roundFloat(v float64, d int64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	var r float64
	if d < 0 {
		m := math.Pow(10, float64(-d))
		r = math.Round(v/m) * m
		if math.IsInf(r, 0) || math.IsNaN(r) {
			return 0
		}
	} else {
		m := math.Pow(10, float64(d))
		r = math.Round(v*m) / m
		if math.IsInf(r, 0) || math.IsNaN(r) {
			return v
		}
	}
	return r
}

// castTypes are the type names cast() accepts, and sqlTypeNames the SQL
// spellings a user may reach for, to suggest the right one.
var (
	castTypes    = []string{"int64", "float64", "string", "bool", "timestamp"}
	sqlTypeNames = map[string]string{
		"int": "int64", "integer": "int64", "bigint": "int64", "long": "int64",
		"float": "float64", "double": "float64", "real": "float64", "decimal": "float64", "numeric": "float64",
		"varchar": "string", "text": "string", "str": "string",
		"boolean":  "bool",
		"datetime": "timestamp", "timestamptz": "timestamp",
	}
)

// castFunc is cast(x, type). A value that cannot be converted (an unparseable
// string, a float that is NaN, infinite or out of int64's range) is null.
func (c *compiler) castFunc(f fcall) (node, error) {
	name, null, err := c.constString(f, 1, "type")
	if err != nil {
		return nil, err
	}
	if null {
		return nil, c.errAt(f.args[1], "cast() argument 2 (type) must be one of %s, not nil", strings.Join(castTypes, ", "))
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if to, ok := sqlTypeNames[name]; ok {
		return nil, c.errAt(f.args[1], "cast() argument 2 (type): %q is spelled %q here (one of %s)", name, to, strings.Join(castTypes, ", "))
	}
	if err := c.choice(f, 1, "type", name, castTypes); err != nil {
		return nil, err
	}
	x := f.xs[0]
	from := x.typ()
	var to typ
	switch name {
	case "int64":
		to = tInt
	case "float64":
		to = tFloat
	case "string":
		to = tString
	case "bool":
		to = tBool
	case "timestamp":
		if from.k == kTimestamp {
			return x, nil // keeps its unit
		}
		to = tTimestamp(arrow.Microsecond, "UTC")
	}
	if from.k == kNull {
		return &constNode{v: nullConst(to)}, nil
	}
	if from.k == to.k {
		return x, nil
	}
	fn := castKernel(from, to)
	if fn == nil {
		hint := ""
		switch {
		case from.k == kTimestamp && to.k == kInt:
			hint = "; use extract('epoch', ts) for Unix seconds"
		case to.k == kTimestamp:
			hint = "; only a string converts to a timestamp"
		}
		return nil, c.errAt(f.at, "cast() cannot convert %s to %s%s", from, name, hint)
	}
	return c.done(f.at, &unaryNode{x: x, t: to, fn: fn}, x)
}

// castKernel returns the conversion from one type to another, nil when there
// is none. A kernel that finds a row with no result replaces out.valid.
func castKernel(from, to typ) func(in, out *vec) {
	switch {
	case to.k == kFloat && from.k == kInt:
		return intToFloat
	case to.k == kFloat && from.k == kBool:
		return func(in, out *vec) {
			for i, b := range in.b[:len(out.f)] {
				out.f[i] = float64(b2u(b))
			}
		}
	case to.k == kFloat && from.k == kString:
		return parseRows(func(s string, out *vec, i int) bool {
			v, ok := parseFloat(s)
			out.f[i] = v
			return ok
		})
	case to.k == kInt && from.k == kFloat:
		return func(in, out *vec) {
			bad := false
			for i, v := range in.f[:len(out.i)] {
				r, ok := floatToInt(v)
				out.i[i] = r
				bad = bad || !ok
			}
			if bad {
				nullWhere(out, func(i int) bool { _, ok := floatToInt(in.f[i]); return !ok })
			}
		}
	case to.k == kInt && from.k == kBool:
		return func(in, out *vec) {
			for i, b := range in.b[:len(out.i)] {
				out.i[i] = int64(b2u(b))
			}
		}
	case to.k == kInt && from.k == kString:
		return parseRows(func(s string, out *vec, i int) bool {
			v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			out.i[i] = v
			return err == nil
		})
	case to.k == kBool && from.k == kInt:
		return func(in, out *vec) {
			for i, v := range in.i[:len(out.b)] {
				out.b[i] = v != 0
			}
		}
	case to.k == kBool && from.k == kFloat:
		return func(in, out *vec) {
			for i, v := range in.f[:len(out.b)] {
				out.b[i] = v != 0 // NaN is true, as in DuckDB
			}
		}
	case to.k == kBool && from.k == kString:
		return parseRows(func(s string, out *vec, i int) bool {
			switch strings.ToLower(s) {
			case "true", "t", "yes", "y", "1":
				out.b[i] = true
			case "false", "f", "no", "n", "0":
				out.b[i] = false
			default:
				return false
			}
			return true
		})
	case to.k == kTimestamp && from.k == kString:
		return parseRows(func(s string, out *vec, i int) bool {
			t, err := parseTime(strings.TrimSpace(s))
			out.i[i] = t.UnixMicro()
			return err == nil
		})
	case to.k == kString:
		var format func(in *vec, i int) string
		switch from.k {
		case kInt:
			format = func(in *vec, i int) string { return strconv.FormatInt(in.i[i], 10) }
		case kFloat:
			format = func(in *vec, i int) string { return formatFloat(in.f[i]) }
		case kBool:
			format = func(in *vec, i int) string { return strconv.FormatBool(in.b[i]) }
		case kTimestamp:
			f := unitFactor(from.unit)
			format = func(in *vec, i int) string { return formatTimestamp(in.i[i], f) }
		default:
			return nil
		}
		return func(in, out *vec) {
			for i := range out.s {
				if in.validAt(i) {
					out.s[i] = format(in, i)
				}
			}
		}
	}
	return nil
}

// parseRows applies parse to every non-null string row; rows it rejects are null.
func parseRows(parse func(s string, out *vec, i int) bool) func(in, out *vec) {
	return func(in, out *vec) {
		strs := in.str()
		n := outLen(out)
		var valid []bool
		for i := range n {
			if !in.validAt(i) {
				continue
			}
			if !parse(strs[i], out, i) {
				if valid == nil {
					valid = make([]bool, n)
					for j := range valid {
						valid[j] = in.validAt(j)
					}
				}
				valid[i] = false
			}
		}
		if valid != nil {
			out.valid = valid
		}
	}
}

// floatToInt rounds to the nearest int64, ties to even, as DuckDB's CAST of a
// DOUBLE to BIGINT does (2.5 -> 2, 3.5 -> 4); ok is false for NaN, infinities
// and values outside int64's range.
func floatToInt(v float64) (int64, bool) {
	r := math.RoundToEven(v)
	if !(r >= -(1<<63) && r < 1<<63) { // false for NaN too
		return 0, false
	}
	return int64(r), true
}

// parseFloat reads a decimal float, with optional exponent, inf, infinity or
// nan (any case), surrounding spaces ignored. Hexadecimal floats, which Go's
// strconv accepts and DuckDB does not, are rejected.
func parseFloat(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "xX_") {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if !(errors.As(err, &ne) && ne.Err == strconv.ErrRange) {
			return 0, false
		}
		// out of range: ParseFloat returned ±Inf or 0, as DuckDB does
	}
	return v, true
}

// formatFloat writes a float64 as DuckDB's CAST(DOUBLE AS VARCHAR) (and
// Python's repr) do: the shortest digits that read back to the same value,
// in positional notation with at least one decimal (100.0, 0.0001) when the
// decimal exponent is in [-4, 16), else in scientific notation with a signed
// two-digit exponent (1e+16, 1.5e-05); inf, -inf and nan.
func formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(v, 'e', -1, 64) // -d.ddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		return mant + "e" + sign + es
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// formatTimestamp writes ticks (f per second) in UTC as DuckDB writes a
// TIMESTAMP: 2024-01-02 03:04:05, with the fraction of a second when it is
// not zero, trailing zeros dropped (03:04:05.5).
func formatTimestamp(v, f int64) string {
	t := time.Unix(floorDiv(v, f), floorMod(v, f)*(1_000_000_000/f)).UTC()
	return t.Format("2006-01-02 15:04:05.999999999")
}
