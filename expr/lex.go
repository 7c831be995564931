package expr

import "strings"

// prepared is an expression's source made ready for expr-lang's parser.
type prepared struct {
	src string // what the parser reads: the source with each // replaced by "% "
	// intDiv holds the rune offsets of the // operators; the parser sees a %
	// there (same precedence and associativity), binary() reads it back as //.
	intDiv map[int]bool
}

// prepare scans src outside string literals for the operators and comments
// expr-lang's lexer would treat in a way a reader does not expect:
//
//   - // is a line comment to expr-lang, so `bytes // 1000` would silently be
//     `bytes`. Here it is integer division (see arith).
//   - /* */ is a block comment to expr-lang: refused, expressions have no
//     comments (text that is silently ignored can hide a wrong answer).
//   - # starts a closure variable in expr-lang and a comment in YAML, shells
//     and some SQLs: refused.
//   - -- is a comment in SQL, but expr-lang reads it as two minus signs, so
//     `a -- 1` would be a + 1: refused (write a - (-1) or - -x).
//
// A refusal is an *Error at the offending characters.
func prepare(ctx, src string) (prepared, error) {
	p := prepared{src: src}
	rs := []rune(src)
	var out []rune // the rewritten source, allocated on the first //
	refuse := func(at int, msg string) error {
		line, col := 1, 1
		for _, r := range rs[:at] {
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return &Error{Context: ctx, Src: src, Line: line, Column: col, Msg: msg}
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		next := rune(0)
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		switch {
		case r == '\'' || r == '"':
			// A quoted string; a backslash escapes the next character. An
			// unterminated string is left to the parser to report.
			for i++; i < len(rs) && rs[i] != r; i++ {
				if rs[i] == '\\' {
					i++
				}
			}
		case r == '`':
			// A raw string: no escapes.
			for i++; i < len(rs) && rs[i] != '`'; i++ {
			}
		case r == '/' && next == '/':
			if out == nil {
				out = append([]rune(nil), rs...)
				p.intDiv = map[int]bool{}
			}
			out[i], out[i+1] = '%', ' '
			p.intDiv[i] = true
			i++
		case r == '/' && next == '*':
			return p, refuse(i, "/* is not allowed: expressions have no comments (// is integer division)")
		case r == '#':
			return p, refuse(i, "# is not allowed: expressions have no comments")
		case r == '-' && next == '-':
			return p, refuse(i, "-- is not allowed: it is not a comment (expressions have no comments) and would "+
				"read as two minus signs; write a - (-b) or - -x")
		}
	}
	if out != nil {
		p.src = string(out)
	}
	return p, nil
}

// parseMessage is the parser's message about the token at rune offset at,
// with the % that stands for // turned back, and hints for SQL spellings:
// = (expr-lang's let binding) for ==, <> for !=.
func (p prepared) parseMessage(msg string, at int) string {
	if p.intDiv[at] {
		msg = strings.NewReplacer(`"%"`, `"//"`, `(%)`, `(//)`).Replace(msg)
	}
	rs := []rune(p.src)
	switch {
	case strings.Contains(msg, `Operator("=")`):
		msg += "; compare with ==, = only binds a name in let x = value; expression"
	case strings.Contains(msg, `Operator(">")`) && at > 0 && at < len(rs) && rs[at-1] == '<':
		msg += "; not equal is !="
	}
	return msg
}
