package expr

import (
	"math"
	"math/bits"
)

// cmpOp is a comparison operator.
type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var cmpOps = map[string]cmpOp{"==": opEq, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe}

// flip returns the operator that gives the same result with operands swapped.
func (op cmpOp) flip() cmpOp {
	switch op {
	case opLt:
		return opGt
	case opLe:
		return opGe
	case opGt:
		return opLt
	case opGe:
		return opLe
	}
	return op
}

// compare writes a[i] op b[i] to out. A constant operand (ac, bc) has one value.
// len(out) is the length of the non-constant operand, or 1 if both are constant.
func compare[T int64 | float64 | string](op cmpOp, a []T, ac bool, b []T, bc bool, out []bool) {
	if ac && !bc {
		a, b, ac, bc, op = b, a, bc, ac, op.flip()
	}
	if bc {
		c := b[0]
		a = a[:len(out)]
		switch op {
		case opEq:
			for i, x := range a {
				out[i] = x == c
			}
		case opNe:
			for i, x := range a {
				out[i] = x != c
			}
		case opLt:
			for i, x := range a {
				out[i] = x < c
			}
		case opLe:
			for i, x := range a {
				out[i] = x <= c
			}
		case opGt:
			for i, x := range a {
				out[i] = x > c
			}
		case opGe:
			for i, x := range a {
				out[i] = x >= c
			}
		}
		return
	}
	a, b = a[:len(out)], b[:len(out)]
	switch op {
	case opEq:
		for i, x := range a {
			out[i] = x == b[i]
		}
	case opNe:
		for i, x := range a {
			out[i] = x != b[i]
		}
	case opLt:
		for i, x := range a {
			out[i] = x < b[i]
		}
	case opLe:
		for i, x := range a {
			out[i] = x <= b[i]
		}
	case opGt:
		for i, x := range a {
			out[i] = x > b[i]
		}
	case opGe:
		for i, x := range a {
			out[i] = x >= b[i]
		}
	}
}

// compareBool implements == and != on booleans.
func compareBool(op cmpOp, a []bool, ac bool, b []bool, bc bool, out []bool) {
	sa, sb := stride(ac), stride(bc)
	ne := op == opNe
	for i := range out {
		out[i] = (a[i*sa] == b[i*sb]) != ne
	}
}

// stride is 0 for a constant operand and 1 otherwise: x[i*stride(c)] reads row i.
func stride(isConst bool) int {
	if isConst {
		return 0
	}
	return 1
}

// arith writes a[i] op b[i] for op in + - * to out.
func arith[T int64 | float64](op byte, a []T, ac bool, b []T, bc bool, out []T) {
	switch {
	case ac && !bc:
		c := a[0]
		b = b[:len(out)]
		switch op {
		case '+':
			for i, y := range b {
				out[i] = c + y
			}
		case '-':
			for i, y := range b {
				out[i] = c - y
			}
		case '*':
			for i, y := range b {
				out[i] = c * y
			}
		}
	case bc && !ac:
		c := b[0]
		a = a[:len(out)]
		switch op {
		case '+':
			for i, x := range a {
				out[i] = x + c
			}
		case '-':
			for i, x := range a {
				out[i] = x - c
			}
		case '*':
			for i, x := range a {
				out[i] = x * c
			}
		}
	default:
		a, b = a[:len(out)], b[:len(out)]
		switch op {
		case '+':
			for i, x := range a {
				out[i] = x + b[i]
			}
		case '-':
			for i, x := range a {
				out[i] = x - b[i]
			}
		case '*':
			for i, x := range a {
				out[i] = x * b[i]
			}
		}
	}
}

// divide writes a[i] / b[i] (op '/', float), a[i] % b[i] (op '%', int) or
// a[i] // b[i] (op '/', int: truncated toward zero) to out; a zero divisor, and
// MinInt64 // -1 (which has no int64 result), make the row null in valid (which
// the caller owns).
func divide[T int64 | float64](op byte, a []T, ac bool, b []T, bc bool, out []T, valid []bool) {
	sa, sb := stride(ac), stride(bc)
	for i := range out {
		x, y := a[i*sa], b[i*sb]
		if y == 0 {
			valid[i] = false
			continue
		}
		switch op {
		case '%':
			out[i] = T(int64(x) % int64(y)) // Go's % truncates, like SQL's: -7 % 2 = -1
		case '/':
			if isInt[T]() {
				if int64(x) == math.MinInt64 && int64(y) == -1 {
					valid[i] = false
					continue
				}
				out[i] = T(int64(x) / int64(y)) // Go's / truncates toward zero: -7 // 2 = -3
			} else {
				out[i] = x / y
			}
		}
	}
}

func isInt[T int64 | float64]() bool {
	var x T = 1
	x /= 2
	return x == 0
}

// arithInt writes a[i] op b[i] for op in + - * on int64 to out and reports
// whether any row overflowed (then the caller nulls those rows with
// nullOverflows). The check costs a few instructions per row; the rows are
// only looked at again when one overflowed.
func arithInt(op byte, a []int64, ac bool, b []int64, bc bool, out []int64) bool {
	sa, sb := stride(ac), stride(bc)
	var ov int64
	switch op {
	case '+':
		for i := range out {
			x, y := a[i*sa], b[i*sb]
			s := x + y
			ov |= (x ^ s) & (y ^ s)
			out[i] = s
		}
	case '-':
		for i := range out {
			x, y := a[i*sa], b[i*sb]
			s := x - y
			ov |= (x ^ y) & (x ^ s)
			out[i] = s
		}
	case '*':
		over := false
		for i := range out {
			p, o := mulInt(a[i*sa], b[i*sb])
			out[i] = p
			over = over || o
		}
		return over
	}
	return ov < 0
}

// intOverflows reports whether x op y does not fit in int64.
func intOverflows(op byte, x, y int64) bool {
	switch op {
	case '+':
		s := x + y
		return (x^s)&(y^s) < 0
	case '-':
		s := x - y
		return (x^y)&(x^s) < 0
	case '*':
		_, o := mulInt(x, y)
		return o
	}
	return false
}

// mulInt is x * y wrapped, and whether the true product overflows int64.
func mulInt(x, y int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(x), uint64(y))
	h := int64(hi) // the signed high word of the 128-bit product
	if x < 0 {
		h -= y
	}
	if y < 0 {
		h -= x
	}
	return int64(lo), h != int64(lo)>>63
}

// nullOverflows nulls the rows of out where a op b overflowed.
func nullOverflows(op byte, a, b, out *vec) {
	sa, sb := stride(a.isConst), stride(b.isConst)
	nullWhere(out, func(i int) bool { return intOverflows(op, a.i[i*sa], b.i[i*sb]) })
}

// nullWhere makes the rows of out where bad is true null. out.valid may be
// shared with an operand, so it is replaced by a fresh slice, never written.
func nullWhere(out *vec, bad func(i int) bool) {
	n := outLen(out)
	valid := make([]bool, n)
	for i := range valid {
		valid[i] = out.validAt(i) && !bad(i)
	}
	out.valid = valid
}

// logic implements three-valued and/or: false and null = false, true or null = true,
// otherwise any null operand gives null.
func logic(isAnd bool, a, b *vec, ln int) *vec {
	out := newVec(tBool, ln, a.isConst && b.isConst)
	if a.valid == nil && b.valid == nil && !a.isConst && !b.isConst {
		x, y := a.b[:ln], b.b[:ln]
		if isAnd {
			for i := range out.b {
				out.b[i] = x[i] && y[i]
			}
		} else {
			for i := range out.b {
				out.b[i] = x[i] || y[i]
			}
		}
		return out
	}
	sa, sb := stride(a.isConst), stride(b.isConst)
	valid := make([]bool, ln)
	hasNull := false
	for i := range out.b {
		ia, ib := i*sa, i*sb
		aok, bok := a.validAt(ia), b.validAt(ib)
		av, bv := aok && a.b[ia], bok && b.b[ib]
		if isAnd {
			if (aok && !av) || (bok && !bv) {
				valid[i] = true // false, whatever the other side
				continue
			}
		} else if av || bv {
			out.b[i], valid[i] = true, true
			continue
		}
		if aok && bok {
			out.b[i], valid[i] = isAnd, true
			continue
		}
		hasNull = true
	}
	if hasNull {
		out.valid = valid
	}
	return out
}

// absInt and absFloat follow expr-lang's abs: negative values are negated.
func absInt(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func absFloat(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// compareStrings compares string vecs; a column in Arrow layout against a
// constant is compared in place, without materialising its strings.
func compareStrings(op cmpOp, a, b *vec, out []bool) {
	if a.isConst && !b.isConst {
		a, b, op = b, a, op.flip()
	}
	if a.off32 != nil && b.isConst {
		compareRaw(op, a.off32, a.data, b.s[0], out)
		return
	}
	compare(op, a.str(), a.isConst, b.str(), b.isConst, out)
}

func compareRaw(op cmpOp, offs []int32, data []byte, c string, out []bool) {
	offs = offs[:len(out)+1]
	switch op {
	case opEq, opNe:
		ne := op == opNe
		for i := range out {
			lo, hi := offs[i], offs[i+1]
			out[i] = (int(hi-lo) == len(c) && string(data[lo:hi]) == c) != ne
		}
	case opLt:
		for i := range out {
			out[i] = string(data[offs[i]:offs[i+1]]) < c
		}
	case opLe:
		for i := range out {
			out[i] = string(data[offs[i]:offs[i+1]]) <= c
		}
	case opGt:
		for i := range out {
			out[i] = string(data[offs[i]:offs[i+1]]) > c
		}
	case opGe:
		for i := range out {
			out[i] = string(data[offs[i]:offs[i+1]]) >= c
		}
	}
}
