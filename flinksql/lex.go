package flinksql

import (
	"fmt"
	"sort"
	"strings"
)

// tokKind is the kind of a token.
type tokKind int

const (
	tEOF    tokKind = iota
	tIdent          // a bare word: keyword or identifier
	tQuoted         // a `back-quoted` identifier (text without the quotes)
	tString         // a 'string' literal (text unescaped)
	tNumber         // 42, 1.5, 1e3
	tPunct          // ( ) , ; . = < > etc., multi-character operators as one token
)

// token is one lexeme with its byte offset in the file.
type token struct {
	kind tokKind
	text string // for tString the unescaped value, for tQuoted the name
	off  int    // byte offset of the first character
	end  int    // byte offset after the last character
}

// is reports whether t is the bare word w (case-insensitive).
func (t token) is(w string) bool { return t.kind == tIdent && strings.EqualFold(t.text, w) }

// isP reports whether t is the punctuation p.
func (t token) isP(p string) bool { return t.kind == tPunct && t.text == p }

// Pos is a 1-based line and column in a SQL file.
type Pos struct{ Line, Col int }

// lines maps byte offsets of one file to line:col.
type lines struct{ starts []int }

func newLines(src string) *lines {
	l := &lines{starts: []int{0}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			l.starts = append(l.starts, i+1)
		}
	}
	return l
}

func (l *lines) pos(off int) Pos {
	i := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] > off }) - 1
	if i < 0 {
		i = 0
	}
	return Pos{Line: i + 1, Col: off - l.starts[i] + 1}
}

// Error is one problem in a SQL file, at a position.
type Error struct {
	File string
	Pos  Pos
	Msg  string
}

func (e *Error) Error() string {
	if e.Pos.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
}

// lexError is a problem found at a byte offset, turned into an Error by
// the caller that knows the file.
type lexError struct {
	off int
	msg string
}

func (e *lexError) Error() string { return e.msg }

// lex splits src into tokens, skipping whitespace and comments (`--` to the
// end of the line, `/* */`).
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, &lexError{i, "unterminated /* comment"}
			}
			if i+2 < len(src) && src[i+2] == '+' {
				// a hint changes what the query means (STATE_TTL, OPTIONS):
				// refused rather than read as a comment
				return nil, &lexError{i, "/*+ ... */: query hints (STATE_TTL, OPTIONS, ...) are not supported; SET 'table.exec.state.ttl' bounds every regular join and ROW_NUMBER of the file"}
			}
			i += j + 4
		case c == '\'':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(src) {
					return nil, &lexError{i, "unterminated string literal"}
				}
				if src[j] == '\'' {
					if j+1 < len(src) && src[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(src[j])
				j++
			}
			toks = append(toks, token{kind: tString, text: b.String(), off: i, end: j + 1})
			i = j + 1
		case c == '`':
			j := strings.IndexByte(src[i+1:], '`')
			if j < 0 {
				return nil, &lexError{i, "unterminated `quoted` identifier"}
			}
			if j == 0 {
				return nil, &lexError{i, "empty `quoted` identifier"}
			}
			toks = append(toks, token{kind: tQuoted, text: src[i+1 : i+1+j], off: i, end: i + j + 2})
			i += j + 2
		case c == '"':
			return nil, &lexError{i, `double quotes: Flink SQL quotes identifiers with backquotes (` + "`name`" + `) and strings with single quotes`}
		case isIdentStart(c):
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			toks = append(toks, token{kind: tIdent, text: src[i:j], off: i, end: j})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.') {
				j++
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				k := j + 1
				if k < len(src) && (src[k] == '+' || src[k] == '-') {
					k++
				}
				if k < len(src) && src[k] >= '0' && src[k] <= '9' {
					j = k
					for j < len(src) && src[j] >= '0' && src[j] <= '9' {
						j++
					}
				}
			}
			toks = append(toks, token{kind: tNumber, text: src[i:j], off: i, end: j})
			i = j
		default:
			n := 1
			if i+1 < len(src) {
				switch src[i : i+2] {
				case "<=", ">=", "<>", "!=", "||", "=>":
					n = 2
				}
			}
			if n == 1 && !strings.ContainsRune("(),;.=<>+-*/%", rune(c)) {
				if c < 0x20 || c >= 0x7f {
					return nil, &lexError{i, fmt.Sprintf("unexpected character %q", rune(c))}
				}
				return nil, &lexError{i, fmt.Sprintf("unexpected character %q", c)}
			}
			toks = append(toks, token{kind: tPunct, text: src[i : i+n], off: i, end: i + n})
			i += n
		}
	}
	toks = append(toks, token{kind: tEOF, off: len(src), end: len(src)})
	return toks, nil
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// splitStatements cuts tokens at `;` (the EOF token closes the last).
func splitStatements(toks []token) [][]token {
	var out [][]token
	start := 0
	for i, t := range toks {
		if t.isP(";") || t.kind == tEOF {
			if i > start {
				st := append([]token(nil), toks[start:i]...)
				st = append(st, token{kind: tEOF, off: t.off, end: t.off})
				out = append(out, st)
			}
			start = i + 1
		}
	}
	return out
}
