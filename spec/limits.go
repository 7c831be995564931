package spec

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on what the spec loader accepts. They are checked on the raw bytes
// before the YAML library sees them: its cost grows with the square of the
// nesting depth (100,000 nested '[' took 33 s and 15 GB), so depth must be
// refused before parsing, not while converting. No valid spec comes near
// any of them.
const (
	// MaxSpecBytes bounds the size of a spec file.
	MaxSpecBytes = 1 << 20
	// maxDepth bounds nesting: flow collections ([ {) plus block levels
	// (indentation and compact "- " / "? " entries).
	maxDepth = 64
	// maxElements bounds the number of YAML nodes (an upper estimate:
	// block entries, keys, flow items and collections).
	maxElements = 10000
	// excerptRunes bounds how much of an offending value a message quotes.
	excerptRunes = 60
	// maxMsgLen bounds one problem's message; maxPathLen its field path.
	maxMsgLen  = 400
	maxPathLen = 100
)

// checkText refuses data that is not a spec-sized, reasonably nested UTF-8
// text, before any parsing. It reads data once and allocates nothing but the
// error it returns.
func checkText(data []byte) *FieldError {
	if len(data) > MaxSpecBytes {
		return &FieldError{Msg: fmt.Sprintf("spec is larger than the limit of %d bytes (1 MiB)", MaxSpecBytes)}
	}
	if pos, what := notText(data); what != "" {
		return &FieldError{Pos: pos, Msg: "not a text file: " + what + " (a spec is UTF-8 YAML text)"}
	}
	return scanNesting(data)
}

// notText finds the first byte that has no place in a YAML text: invalid
// UTF-8, NUL, or a control character other than tab, CR and LF.
func notText(data []byte) (Pos, string) {
	line, lineStart := 1, 0
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n':
				line, lineStart = line+1, i+1
			case c == 0:
				return Pos{line, i - lineStart + 1}, "NUL byte"
			case (c < 0x20 && c != '\t' && c != '\r') || c == 0x7f:
				return Pos{line, i - lineStart + 1}, fmt.Sprintf("control character %q", c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return Pos{line, utf8.RuneCount(data[lineStart:i]) + 1}, fmt.Sprintf("invalid UTF-8 byte 0x%02x", c)
		}
		i += size
	}
	return Pos{}, ""
}

// scanStats is what scanYAML measured.
type scanStats struct {
	depth    int // deepest nesting estimate
	elements int // node count estimate
}

// scanNesting refuses a YAML text whose estimated nesting or node count is
// over its limit.
func scanNesting(data []byte) *FieldError {
	_, err := scanYAML(data, maxDepth, maxElements)
	return err
}

// scanYAML estimates, without parsing, the nesting depth and the number of
// nodes of a YAML text, stopping with an error at the first place either
// goes over its limit. It follows the constructs a spec can use: block
// indentation, compact "- " and "? " entries, "key: value" on one line, flow
// collections, quoted scalars (which may span lines), block scalars (| and
// >), anchors, tags, aliases and comments.
//
// The estimate must never be much lower than the nesting the YAML library
// builds, or a hostile file gets past it. So text it decides to skip (quoted
// scalars, comments, block scalar content) is still measured, by the
// balance of its brackets and the "- " entries that start its lines, as if
// it were structure; a real spec has few brackets in its strings.
func scanYAML(data []byte, depthLimit, elementLimit int) (scanStats, *FieldError) {
	var (
		st        scanStats
		indents   = make([]int, 0, 16) // indentation of the open block levels
		flow      int                  // open flow collections
		quote     byte                 // '"' or '\'' inside a quoted scalar
		block     = -1                 // indentation of the line that opened a block scalar
		base      int                  // depth where the skipped text started
		quoteAt   int                  // block depth where the open quote started
		flowAt    int                  // block depth where the open flow collection started
		shadow    int                  // bracket balance in skipped text
		lineStart int
	)
	check := func(d, line, col int) *FieldError {
		if d > st.depth {
			st.depth = d
		}
		if d > depthLimit {
			return &FieldError{Pos: Pos{line, col}, Msg: fmt.Sprintf("nesting deeper than %d levels", depthLimit)}
		}
		if st.elements > elementLimit {
			return &FieldError{Pos: Pos{line, col}, Msg: fmt.Sprintf("more than %d elements (keys, values and list items)", elementLimit)}
		}
		return nil
	}
	// skipped measures skipped text: brackets and, at its start, "- ".
	skipped := func(t []byte, line, col int, atLineStart bool) *FieldError {
		entries := 0
		for i := 0; atLineStart && i+1 < len(t) && (t[i] == '-' || t[i] == '?') && (t[i+1] == ' ' || t[i+1] == '\t'); i += 2 {
			entries++
			for i+2 < len(t) && (t[i+2] == ' ' || t[i+2] == '\t') {
				i++
			}
		}
		for i, c := range t {
			switch c {
			case '[', '{':
				shadow++
				if err := check(base+shadow+entries, line, col+i); err != nil {
					return err
				}
			case ']', '}':
				shadow = max(shadow-1, 0)
			}
		}
		return check(base+shadow+entries, line, col)
	}
	for line := 1; lineStart < len(data); line++ {
		end := bytes.IndexByte(data[lineStart:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += lineStart
		}
		l := bytes.TrimRight(data[lineStart:end], " \t\r")
		lineStart = end + 1
		indent := 0
		for indent < len(l) && l[indent] == ' ' {
			indent++
		}
		rest := l[indent:]
		if block >= 0 {
			if len(rest) == 0 || indent > block {
				if err := skipped(rest, line, indent+1, true); err != nil {
					return st, err
				}
				continue // block scalar content
			}
			block, shadow = -1, 0
		}
		i := 0
		// depth is the block nesting here; flow collections add flow.
		depth, valueStart := quoteAt, false // valueStart: a node (and so a quote) may start here
		if quote == 0 {
			depth, valueStart = flowAt, true
		}
		if quote == 0 && flow == 0 {
			// Block context: the line's indentation closes deeper levels.
			if len(rest) == 0 || rest[0] == '#' {
				base = len(indents)
				if err := skipped(rest, line, indent+1, false); err != nil {
					return st, err
				}
				shadow = 0
				continue
			}
			if indent == 0 && (bytes.HasPrefix(rest, []byte("---")) || bytes.HasPrefix(rest, []byte("..."))) &&
				(len(rest) == 3 || rest[3] == ' ' || rest[3] == '\t') {
				indents = indents[:0]
				i = 3
			}
			for len(indents) > 0 && indents[len(indents)-1] > indent {
				indents = indents[:len(indents)-1]
			}
			if len(indents) == 0 || indents[len(indents)-1] < indent {
				indents = append(indents, indent)
			}
			depth = len(indents)
			st.elements++
			if err := check(depth, line, indent+1); err != nil {
				return st, err
			}
		}
		for ; i < len(rest); i++ {
			c := rest[i]
			col := indent + i + 1
			if quote != 0 {
				j := i
				for ; j < len(rest); j++ {
					if quote == '"' && rest[j] == '\\' {
						j++
					} else if rest[j] == quote {
						if quote == '\'' && j+1 < len(rest) && rest[j+1] == '\'' {
							j++
						} else {
							break
						}
					}
				}
				if err := skipped(rest[i:min(j, len(rest))], line, col, false); err != nil {
					return st, err
				}
				if j >= len(rest) {
					break // the quoted scalar goes on on the next line
				}
				i, quote, shadow = j, 0, 0
				valueStart = false
				continue
			}
			next := byte(' ')
			if i+1 < len(rest) {
				next = rest[i+1]
			}
			blank := next == ' ' || next == '\t'
			switch {
			case c == ' ' || c == '\t':
				continue
			case c == '#' && (i == 0 || rest[i-1] == ' ' || rest[i-1] == '\t'):
				base = depth + flow
				if err := skipped(rest[i:], line, col, false); err != nil {
					return st, err
				}
				shadow = 0
				i = len(rest)
				continue
			case (c == '"' || c == '\'') && valueStart:
				quote, base, quoteAt = c, depth+flow, depth
				st.elements++
				continue
			case (c == '-' || c == '?') && valueStart && flow == 0 && blank:
				depth++ // compact block entry: "- - x", "? - x"
				st.elements++
				valueStart = true
			case c == ':' && (blank || (flow > 0 && i > 0 && (rest[i-1] == '"' || rest[i-1] == '\''))):
				if flow == 0 {
					depth++ // a mapping value on this line
				}
				st.elements++
				valueStart = true
			case (c == '|' || c == '>') && valueStart && flow == 0 && blockHeader(rest[i+1:]):
				block, base = indent, depth
				i = len(rest)
				continue
			case (c == '[' || c == '{') && (valueStart || flow > 0):
				if flow == 0 {
					flowAt = depth
				}
				flow++
				st.elements++
				valueStart = true
			case (c == ']' || c == '}') && flow > 0:
				flow--
				valueStart = false
			case c == ',' && flow > 0:
				st.elements++
				valueStart = true
			case (c == '&' || c == '!' || c == '*') && valueStart:
				// An anchor or tag prefixes a node; an alias is one.
				for i+1 < len(rest) && rest[i+1] != ' ' && rest[i+1] != '\t' && rest[i+1] != ',' &&
					rest[i+1] != '[' && rest[i+1] != ']' && rest[i+1] != '{' && rest[i+1] != '}' {
					i++
				}
				if c == '*' {
					st.elements++
					valueStart = false
				}
			default:
				valueStart = false
			}
			if err := check(depth+flow, line, col); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// blockHeader reports whether t, the rest of a line after | or >, is a block
// scalar header: chomping and indentation indicators, then nothing or a
// comment.
func blockHeader(t []byte) bool {
	i := 0
	for i < len(t) && i < 2 && (t[i] == '-' || t[i] == '+' || (t[i] >= '1' && t[i] <= '9')) {
		i++
	}
	t = bytes.TrimLeft(t[i:], " \t")
	return len(t) == 0 || t[0] == '#'
}

// excerpt quotes s for an error message: at most excerptRunes runes, control
// characters and invalid bytes escaped as in Go syntax, with "..." and the
// full length after the closing quote when s was cut.
func excerpt(s string) string {
	n, cut := 0, -1
	for i := range s {
		if n == excerptRunes {
			cut = i
			break
		}
		n++
	}
	if cut < 0 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// reQuote is err's message with the Go-quoted value v (as fmt's %q writes
// it) replaced by its excerpt, for errors from functions that quote whole
// values.
func reQuote(err error, v string) string {
	return strings.ReplaceAll(err.Error(), strconv.Quote(v), excerpt(v))
}

// quoted formats as excerpt whatever the verb.
type quoted string

func (q quoted) Format(f fmt.State, _ rune) { io.WriteString(f, excerpt(string(q))) }

// message is fmt.Sprintf, except that a string operand of %q is quoted by
// excerpt, and the result is made one short line by oneLine. It is how
// every collected problem is worded, so that no message echoes a long or
// multi-line value.
func message(format string, args ...any) string {
	if strings.Contains(format, "%q") {
		args = append([]any(nil), args...)
		arg := 0
		for i := 0; i < len(format); i++ {
			if format[i] != '%' {
				continue
			}
			i++
			for i < len(format) && strings.IndexByte("+-# 0123456789.", format[i]) >= 0 {
				i++
			}
			if i >= len(format) || format[i] == '[' || format[i] == '*' {
				break // explicit indexes: leave the arguments alone
			}
			if format[i] == '%' {
				continue
			}
			if format[i] == 'q' && arg < len(args) {
				if v := reflect.ValueOf(args[arg]); v.Kind() == reflect.String {
					args[arg] = quoted(v.String())
				}
			}
			arg++
		}
	}
	return oneLine(fmt.Sprintf(format, args...), maxMsgLen)
}

// oneLine escapes control characters and invalid UTF-8 in s (so that a
// message is one line) and cuts it to at most max bytes on a rune boundary,
// ending in "...".
func oneLine(s string, max int) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= utf8.RuneSelf {
			clean = false
			break
		}
	}
	if clean && len(s) <= max {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if b.Len() > max {
			break
		}
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	if b.Len() > max {
		return cutRunes(b.String(), max) + "..."
	}
	return b.String()
}

// cutRunes cuts s to at most max bytes on a rune boundary.
func cutRunes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
