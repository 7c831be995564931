package expr

import (
	"math"
	"strings"
	"unicode"
)

func (c *compiler) trimFunc(f fcall) (node, error) {
	s, err := c.arg(f, 0, "s", tString)
	if err != nil {
		return nil, err
	}
	left, right := f.name != "rtrim", f.name != "ltrim"
	if len(f.xs) == 1 {
		fn := func(x string) string {
			switch {
			case left && right:
				return strings.TrimSpace(x)
			case left:
				return strings.TrimLeftFunc(x, unicode.IsSpace)
			}
			return strings.TrimRightFunc(x, unicode.IsSpace)
		}
		return c.done(f.at, &unaryNode{x: s, t: tString, fn: mapStrings(fn)}, s)
	}
	chars, err := c.arg(f, 1, "chars", tString)
	if err != nil {
		return nil, err
	}
	return c.fn(f.at, tString, false, func(a []*vec, out *vec) {
		ss, cs := a[0].str(), a[1].str()
		s0, s1 := stride(a[0].isConst), stride(a[1].isConst)
		for i := range out.s {
			x, cut := ss[i*s0], cs[i*s1]
			switch {
			case left && right:
				x = strings.Trim(x, cut)
			case left:
				x = strings.TrimLeft(x, cut)
			default:
				x = strings.TrimRight(x, cut)
			}
			out.s[i] = x
		}
	}, s, chars)
}

// mapStrings lifts a string function to a unaryNode kernel.
func mapStrings(fn func(string) string) func(in, out *vec) {
	return func(in, out *vec) {
		for i, x := range in.str()[:len(out.s)] {
			if in.validAt(i) {
				out.s[i] = fn(x)
			}
		}
	}
}

func (c *compiler) substringFunc(f fcall) (node, error) {
	s, err := c.arg(f, 0, "s", tString)
	if err != nil {
		return nil, err
	}
	start, err := c.arg(f, 1, "start", tInt)
	if err != nil {
		return nil, err
	}
	if len(f.xs) == 2 {
		return c.fn(f.at, tString, false, func(a []*vec, out *vec) {
			ss, st := a[0].str(), a[1].i
			s0, s1 := stride(a[0].isConst), stride(a[1].isConst)
			for i := range out.s {
				out.s[i] = substr(ss[i*s0], st[i*s1], math.MaxInt64)
			}
		}, s, start)
	}
	n, err := c.arg(f, 2, "len", tInt)
	if err != nil {
		return nil, err
	}
	if k, ok := n.(*constNode); ok && !k.v.isNullConst() && k.v.i[0] < 0 {
		return nil, c.errAt(f.args[2], "substring() argument 3 (len) must not be negative, got %d", k.v.i[0])
	}
	return c.fn(f.at, tString, true, func(a []*vec, out *vec) {
		ss, st, ls := a[0].str(), a[1].i, a[2].i
		s0, s1, s2 := stride(a[0].isConst), stride(a[1].isConst), stride(a[2].isConst)
		for i := range out.s {
			l := ls[i*s2]
			if l < 0 {
				out.valid[i] = false
				continue
			}
			out.s[i] = substr(ss[i*s0], st[i*s1], l)
		}
	}, s, start, n)
}

// substr is SQL's substring: the characters (runes) at 1-based positions
// start .. start+n-1 that exist. A start before 1 still counts positions from
// there (substr("abc", 0, 2) is "a"). n >= 0.
func substr(s string, start, n int64) string {
	end := start + n // exclusive
	if start > 0 && n > math.MaxInt64-start {
		end = math.MaxInt64
	}
	if start < 1 {
		start = 1
	}
	if end <= start || s == "" {
		return ""
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		if start > int64(len(s)) {
			return ""
		}
		if end-1 > int64(len(s)) {
			end = int64(len(s)) + 1
		}
		return s[start-1 : end-1]
	}
	pos, from := int64(1), -1
	for bi := range s {
		if pos == start {
			from = bi
		}
		if pos == end {
			return s[from:bi]
		}
		pos++
	}
	if from < 0 {
		return ""
	}
	return s[from:]
}

func (c *compiler) concatFunc(f fcall) (node, error) {
	xs := make([]node, len(f.xs))
	for i := range f.xs {
		x, err := c.arg(f, i, "s", tString)
		if err != nil {
			return nil, err
		}
		xs[i] = x
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	return c.fn(f.at, tString, false, func(a []*vec, out *vec) {
		strs := make([][]string, len(a))
		strides := make([]int, len(a))
		for k, v := range a {
			strs[k], strides[k] = v.str(), stride(v.isConst)
		}
		var buf []byte
		ends := make([]int, len(out.s))
		for i := range out.s {
			if out.validAt(i) {
				for k, s := range strs {
					buf = append(buf, s[i*strides[k]]...)
				}
			}
			ends[i] = len(buf)
		}
		cutStrings(string(buf), ends, out.s)
	}, xs...)
}

// cutStrings sets out[i] to all[ends[i-1]:ends[i]]: the rows share one string.
func cutStrings(all string, ends []int, out []string) {
	from := 0
	for i, to := range ends {
		out[i] = all[from:to]
		from = to
	}
}

func (c *compiler) splitPartFunc(f fcall) (node, error) {
	s, err := c.arg(f, 0, "s", tString)
	if err != nil {
		return nil, err
	}
	sep, err := c.arg(f, 1, "sep", tString)
	if err != nil {
		return nil, err
	}
	n, err := c.arg(f, 2, "n", tInt)
	if err != nil {
		return nil, err
	}
	if k, ok := n.(*constNode); ok && !k.v.isNullConst() && k.v.i[0] == 0 {
		return nil, c.errAt(f.args[2], "split_part() argument 3 (n) must not be 0: fields count from 1 (or from -1 at the end)")
	}
	return c.fn(f.at, tString, true, func(a []*vec, out *vec) {
		ss, ps, ns := a[0].str(), a[1].str(), a[2].i
		s0, s1, s2 := stride(a[0].isConst), stride(a[1].isConst), stride(a[2].isConst)
		for i := range out.s {
			k := ns[i*s2]
			if k == 0 {
				out.valid[i] = false
				continue
			}
			out.s[i] = splitPart(ss[i*s0], ps[i*s1], k)
		}
	}, s, sep, n)
}

// splitPart returns field n (1-based; negative counts from the end) of s split
// on sep, or "" when there is no such field. An empty sep does not split.
func splitPart(s, sep string, n int64) string {
	if sep == "" {
		if n == 1 || n == -1 {
			return s
		}
		return ""
	}
	if n > 0 {
		for ; n > 1; n-- {
			i := strings.Index(s, sep)
			if i < 0 {
				return ""
			}
			s = s[i+len(sep):]
		}
		if i := strings.Index(s, sep); i >= 0 {
			return s[:i]
		}
		return s
	}
	for ; n < -1; n++ {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			return ""
		}
		s = s[:i]
	}
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[i+len(sep):]
	}
	return s
}

func (c *compiler) replaceFunc(f fcall) (node, error) {
	xs := make([]node, 3)
	for i, p := range []string{"s", "from", "to"} {
		x, err := c.arg(f, i, p, tString)
		if err != nil {
			return nil, err
		}
		xs[i] = x
	}
	return c.fn(f.at, tString, false, func(a []*vec, out *vec) {
		ss, fs, ts := a[0].str(), a[1].str(), a[2].str()
		s0, s1, s2 := stride(a[0].isConst), stride(a[1].isConst), stride(a[2].isConst)
		for i := range out.s {
			s, from := ss[i*s0], fs[i*s1]
			if from == "" {
				out.s[i] = s
				continue
			}
			out.s[i] = strings.ReplaceAll(s, from, ts[i*s2])
		}
	}, xs...)
}

func (c *compiler) strPredFunc(f fcall) (node, error) {
	s, err := c.arg(f, 0, "s", tString)
	if err != nil {
		return nil, err
	}
	pname, op := "prefix", "startsWith"
	if f.name == "ends_with" {
		pname, op = "suffix", "endsWith"
	}
	x, err := c.arg(f, 1, pname, tString)
	if err != nil {
		return nil, err
	}
	return c.done(f.at, &binaryNode{l: s, r: x, t: tBool, fn: strPredKernel(op, nil)}, s, x)
}

// pattern compiles the constant pattern argument i of f once.
func (c *compiler) pattern(f fcall, i int) (*rx, bool, error) {
	p, null, err := c.constString(f, i, "pattern")
	if err != nil || null {
		return nil, null, err
	}
	re, err := compileRx(p)
	if err != nil {
		return nil, false, c.errAt(f.args[i], "%s() argument %d (pattern) is not a valid RE2 pattern: %v", f.name, i+1, err)
	}
	return re, false, nil
}

func (c *compiler) regexpMatchFunc(f fcall) (node, error) {
	s, err := c.arg(f, 0, "s", tString)
	if err != nil {
		return nil, err
	}
	re, null, err := c.pattern(f, 1)
	if err != nil {
		return nil, err
	}
	if null {
		return &constNode{v: nullConst(tBool)}, nil
	}
	return c.done(f.at, &unaryNode{x: s, t: tBool, fn: func(in, out *vec) {
		for i, x := range in.str()[:len(out.b)] {
			out.b[i] = re.MatchString(x)
		}
	}}, s)
}

func (c *compiler) regexpExtractFunc(f fcall) (node, error) {
	s, err := c.arg(f, 0, "s", tString)
	if err != nil {
		return nil, err
	}
	re, null, err := c.pattern(f, 1)
	if err != nil {
		return nil, err
	}
	group := int64(0)
	if len(f.xs) == 3 {
		g, gnull, err := c.constInt(f, 2, "group")
		if err != nil {
			return nil, err
		}
		if !null && !gnull && (g < 0 || g > int64(re.NumSubexp())) {
			return nil, c.errAt(f.args[2], "regexp_extract() argument 3 (group) is %d, but the pattern has %d group(s)", g, re.NumSubexp())
		}
		null, group = null || gnull, g
	}
	if null {
		return &constNode{v: nullConst(tString)}, nil
	}
	g := int(group)
	return c.fn(f.at, tString, true, func(a []*vec, out *vec) {
		ss, s0 := a[0].str(), stride(a[0].isConst)
		for i := range out.s {
			if !out.valid[i] {
				continue
			}
			x := ss[i*s0]
			m := re.FindStringSubmatchIndex(x)
			if m == nil || m[2*g] < 0 {
				out.valid[i] = false // no match, or the group took no part in it
				continue
			}
			out.s[i] = x[m[2*g]:m[2*g+1]]
		}
	}, s)
}
