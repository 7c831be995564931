package expr

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// rx is a compiled RE2 pattern with a literal fast path. Most patterns
// written against real data contain a literal every match must contain
// ("channel_id=" in "(&|^)channel_id=([^&]*)"), and Go's regexp only
// skips ahead by a literal at the very start of a pattern. rx finds the
// literal with strings.Index first: a string without it cannot match, and
// when the part of the pattern before the literal has a bounded width w the
// leftmost match starts at or after (first occurrence of the literal) - w,
// so the search runs on that suffix only. Results (match, offsets,
// submatches) equal the plain regexp's on every input.
type rx struct {
	re  *regexp.Regexp
	lit string // every match contains lit ("": no fast path)
	// before is the greatest width in bytes of the pattern before lit (-1:
	// unbounded, so no suffix search).
	before int
	// mid is re with ^ (start of text) made unmatchable: the pattern run on
	// a suffix that does not start the text (nil: re has no ^, use re).
	mid *regexp.Regexp
}

// compileRx compiles pattern like regexp.Compile and works out its fast path.
func compileRx(pattern string) (*rx, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	r := &rx{re: re, before: -1}
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return r, nil // unreachable: regexp.Compile parsed it with the same flags
	}
	tree = tree.Simplify()
	parts := []*syntax.Regexp{tree}
	if tree.Op == syntax.OpConcat {
		parts = tree.Sub
	}
	width := 0 // bounded width of parts[:i] (-1: unbounded)
	for _, p := range parts {
		if p.Op == syntax.OpLiteral && p.Flags&syntax.FoldCase == 0 && len(p.Rune) > 0 {
			lit := string(p.Rune)
			switch {
			case width >= 0 && (r.before < 0 || len(lit) > len(r.lit)):
				r.lit, r.before = lit, width // the longest literal with a bounded prefix
			case r.before < 0 && len(lit) > len(r.lit):
				r.lit = lit // prefilter only
			}
		}
		if width >= 0 {
			if w := maxWidth(p); w < 0 {
				width = -1
			} else {
				width += w
			}
		}
	}
	if r.lit == "" || r.before < 0 {
		return r, nil
	}
	if contextual(tree) {
		r.before = -1 // \b, \B, (?m)^ look at the byte before the suffix
		return r, nil
	}
	if hasOp(tree, syntax.OpBeginText) {
		mid, err := regexp.Compile(neverBeginText(tree).String())
		if err != nil || mid.NumSubexp() != re.NumSubexp() {
			r.before = -1
			return r, nil
		}
		r.mid = mid
	}
	return r, nil
}

// maxWidth is the greatest number of bytes re can match, or -1 when
// unbounded.
func maxWidth(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 0
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return len(re.Rune) * utf8.UTFMax // a folded rune may have a longer encoding
		}
		return len(string(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxWidth(re.Sub[0])
	case syntax.OpRepeat:
		if re.Max < 0 {
			return -1
		}
		w := maxWidth(re.Sub[0])
		if w < 0 {
			return -1
		}
		return w * re.Max
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			w := maxWidth(s)
			if w < 0 {
				return -1
			}
			n += w
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			w := maxWidth(s)
			if w < 0 {
				return -1
			}
			n = max(n, w)
		}
		return n
	}
	return -1 // star, plus, anything unknown
}

// contextual reports whether re has an assertion that looks at the byte
// before a position (so it cannot be run on a suffix of the text).
func contextual(re *syntax.Regexp) bool {
	return hasOp(re, syntax.OpBeginLine) || hasOp(re, syntax.OpWordBoundary) || hasOp(re, syntax.OpNoWordBoundary)
}

func hasOp(re *syntax.Regexp, op syntax.Op) bool {
	if re.Op == op {
		return true
	}
	for _, s := range re.Sub {
		if hasOp(s, op) {
			return true
		}
	}
	return false
}

// neverBeginText returns a copy of re in which ^ (start of text) matches
// nothing.
func neverBeginText(re *syntax.Regexp) *syntax.Regexp {
	c := *re
	if c.Op == syntax.OpBeginText {
		c = syntax.Regexp{Op: syntax.OpNoMatch, Flags: re.Flags}
		return &c
	}
	if len(re.Sub) > 0 {
		c.Sub = make([]*syntax.Regexp, len(re.Sub))
		for i, s := range re.Sub {
			c.Sub[i] = neverBeginText(s)
		}
	}
	return &c
}

// suffix returns the regexp and the offset to run it at for s, or ok false
// when s cannot match.
func (r *rx) suffix(s string) (re *regexp.Regexp, off int, ok bool) {
	if r.lit == "" {
		return r.re, 0, true
	}
	i := strings.Index(s, r.lit)
	if i < 0 {
		return nil, 0, false
	}
	if r.before < 0 || i <= r.before {
		return r.re, 0, true
	}
	off = i - r.before
	if r.mid != nil {
		return r.mid, off, true
	}
	return r.re, off, true
}

// MatchString reports whether s contains a match.
func (r *rx) MatchString(s string) bool {
	re, off, ok := r.suffix(s)
	return ok && re.MatchString(s[off:])
}

// FindStringSubmatchIndex is regexp's: the leftmost match's and its
// groups' byte offsets in s (-1: a group took no part), nil for no match.
func (r *rx) FindStringSubmatchIndex(s string) []int {
	re, off, ok := r.suffix(s)
	if !ok {
		return nil
	}
	m := re.FindStringSubmatchIndex(s[off:])
	if off > 0 {
		for i, v := range m {
			if v >= 0 {
				m[i] = v + off
			}
		}
	}
	return m
}

// NumSubexp is the number of parenthesized groups.
func (r *rx) NumSubexp() int { return r.re.NumSubexp() }
