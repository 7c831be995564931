package formats

// A strict, allocation-light scanner for JSON lines: one flat JSON object per
// line. Values of declared columns are parsed straight into the row's cells;
// values of unknown keys (including nested objects and arrays) are validated
// and skipped. Strings decode as encoding/json decodes valid ones, with one
// strict rule where encoding/json would substitute U+FFFD:
//
//   - A string that is not valid UTF-8 (raw invalid bytes, or a \uD800-\uDFFF
//     escape that is not half of a surrogate pair) is never replaced and never
//     passed through. As the value of a declared column (of any type) it
//     rejects the row ("column "x": value is not valid UTF-8: ..."). As a key
//     it names no declared column, so its value is skipped like that of any
//     unknown key; values of unknown keys are not checked (as CSV columns the
//     schema does not declare are not).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of skipped values (as encoding/json does).
const maxJSONDepth = 10000

// parallelMinChunk is the smallest piece of a file decoded by its own goroutine.
const parallelMinChunk = 4 << 20

func decodeJSONL(file string, data []byte, opts DecodeOptions) (*Decoded, error) {
	p, err := newPlan(file, opts)
	if err != nil {
		return nil, err
	}
	data = stripBOM(data)
	chunks, first := parallelChunks(data, parallelism(opts), parallelMinChunk)
	if len(chunks) == 1 {
		rb := newRowBuilder(p)
		jsonChunk(rb, data, 1)
		return rb.result(), nil
	}
	return runChunks(p, chunks, first, jsonChunk), nil
}

// jsonChunk decodes the lines of chunk, the first of which is line number line.
func jsonChunk(rb *rowBuilder, chunk []byte, line int64) {
	d := newJSONDecoder(rb)
	avg := bytes.IndexByte(chunk, '\n') + 1
	if avg <= 0 {
		avg = len(chunk) + 1
	}
	for len(chunk) > 0 {
		if rb.rows == 0 {
			rb.reserve(len(chunk)/avg + 1)
		}
		var ln []byte
		if nl := bytes.IndexByte(chunk, '\n'); nl >= 0 {
			ln, chunk = chunk[:nl], chunk[nl+1:]
		} else {
			ln, chunk = chunk, nil
		}
		if reason := d.line(ln); reason != "" && reason != skipLine {
			rb.reject(line, reason, bytes.TrimSuffix(ln, []byte{'\r'}))
		}
		line++
	}
}

// skipLine is the "reason" of an empty line: skipped, not rejected.
const skipLine = "\x00skip"

type jsonDecoder struct {
	rb     *rowBuilder
	names  []string
	lookup map[string]int
	next   int      // predicted index of the next key's column
	bufs   [][]byte // per-column buffers for unescaped strings
	keyBuf []byte
	// plain[i]: names[i] is spelled as it is inside a JSON string
	// (printable ASCII, no '"' or '\\'), so raw key bytes can match it.
	plain []bool
	// skipped are keys seen that name no column, spelled plainly (a
	// few): the next occurrence is recognised without scanning it.
	skipped []string
	// pats and skippedPats are names and skipped as keyPats.
	pats, skippedPats []keyPat
}

// maxSkippedKeys bounds jsonDecoder.skipped.
const maxSkippedKeys = 8

// quickKey recognises the key starting at b[i] == '"' when it is spelled
// plainly and is the predicted column or a key skipped before. It returns
// the index after the key's closing quote and its column (-1: no column),
// or end -1 when the key needs scanning.
func (d *jsonDecoder) quickKey(b []byte, i int) (end, col int) {
	if i+17 <= len(b) {
		// Compare the sixteen bytes after the opening quote with each
		// candidate's quoted spelling under its mask.
		x0 := binary.LittleEndian.Uint64(b[i+1:])
		x1 := binary.LittleEndian.Uint64(b[i+9:])
		if n := d.next; n < len(d.pats) {
			if p := &d.pats[n]; p.n > 0 && x0&p.m0 == p.w0 && x1&p.m1 == p.w1 {
				d.next = n + 1
				return i + 1 + p.n, n
			}
		}
		for k := range d.skippedPats {
			if p := &d.skippedPats[k]; p.n > 0 && x0&p.m0 == p.w0 && x1&p.m1 == p.w1 {
				return i + 1 + p.n, -1
			}
		}
	}
	if n := d.next; n < len(d.names) && d.plain[n] {
		name := d.names[n]
		if e := i + 1 + len(name); e < len(b) && b[e] == '"' && string(b[i+1:e]) == name {
			d.next = n + 1
			return e + 1, n
		}
	}
	for _, k := range d.skipped {
		if e := i + 1 + len(k); e < len(b) && b[e] == '"' && string(b[i+1:e]) == k {
			return e + 1, -1
		}
	}
	return -1, -1
}

// keyPat is a plainly spelled key and its closing quote as two masked
// little-endian words; n is its length with the quote (0: longer than 16
// bytes, or not plain: compare it as a string).
type keyPat struct {
	w0, w1, m0, m1 uint64
	n              int
}

func newKeyPat(key string, plain bool) keyPat {
	q := key + `"`
	if !plain || len(q) > 16 {
		return keyPat{}
	}
	var w, m [16]byte
	copy(w[:], q)
	for k := range q {
		m[k] = 0xff
	}
	return keyPat{w0: binary.LittleEndian.Uint64(w[:8]), w1: binary.LittleEndian.Uint64(w[8:]),
		m0: binary.LittleEndian.Uint64(m[:8]), m1: binary.LittleEndian.Uint64(m[8:]), n: len(q)}
}

func newJSONDecoder(rb *rowBuilder) *jsonDecoder {
	d := &jsonDecoder{rb: rb, names: rb.p.names, lookup: make(map[string]int, len(rb.p.names)), bufs: make([][]byte, len(rb.p.names))}
	d.plain = make([]bool, len(d.names))
	for i, n := range rb.p.names {
		d.lookup[n] = i
		d.plain[i] = true
		for j := 0; j < len(n); j++ {
			d.plain[i] = d.plain[i] && plainStr[n[j]]
		}
		d.pats = append(d.pats, newKeyPat(n, d.plain[i]))
	}
	return d
}

func (d *jsonDecoder) find(key []byte) int {
	if n := d.next; n < len(d.names) && d.names[n] == string(key) {
		d.next = n + 1
		return n
	}
	if len(d.names) <= 16 {
		// A few columns: comparing lengths first rejects most names
		// without touching their bytes, cheaper than hashing the key.
		for j, n := range d.names {
			if len(n) == len(key) && n == string(key) {
				d.next = j + 1
				return j
			}
		}
		return -1
	}
	if j, ok := d.lookup[string(key)]; ok {
		d.next = j + 1
		return j
	}
	return -1
}

func syntaxErr(b []byte, i int, what string) string {
	if i >= len(b) {
		return "invalid JSON: unexpected end of line, " + what
	}
	return fmt.Sprintf("invalid JSON at byte %d: %s", i+1, what)
}

// line decodes one line; it returns "" when the row was committed, skipLine
// for a blank line, or a reject reason.
func (d *jsonDecoder) line(b []byte) string {
	i := skipWS(b, 0)
	if i == len(b) {
		return skipLine
	}
	if b[i] != '{' {
		return syntaxErr(b, i, "expected a JSON object")
	}
	rb := d.rb
	rb.resetCells()
	d.next = 0
	etSeen := false
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return syntaxErr(b, i, "expected a string key")
			}
			end, col := d.quickKey(b, i)
			if end < 0 {
				var flags int
				if end, flags = scanString(b, i); end < 0 {
					return syntaxErr(b, i, "invalid string")
				}
				// A key that is not valid UTF-8 names no column.
				if flags&strBadUTF8 == 0 {
					key := b[i+1 : end-1]
					if flags != 0 {
						key = unquote(&d.keyBuf, key, flags)
					}
					col = d.find(key)
					if col < 0 && flags == 0 && len(d.skipped) < maxSkippedKeys {
						d.skipped = append(d.skipped, string(key))
						d.skippedPats = append(d.skippedPats, newKeyPat(string(key), true))
					}
				}
			}
			i = skipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return syntaxErr(b, i, "expected ':' after key")
			}
			i = skipWS(b, i+1)
			if col < 0 {
				if i = skipValue(b, i, 1); i < 0 {
					return syntaxErr(b, -i-1, "invalid value")
				}
			} else {
				if col == rb.p.eventTime {
					etSeen = true
				}
				var reason string
				if i, reason = d.value(col, b, i); reason != "" {
					return reason
				}
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return syntaxErr(b, i, "expected ',' or '}'")
			}
			if b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if b[i] == '}' {
				i++
				break
			}
			return syntaxErr(b, i, "expected ',' or '}'")
		}
	}
	if i = skipWS(b, i); i != len(b) {
		return syntaxErr(b, i, "unexpected data after the object")
	}
	if reason := rb.checkEventTime(etSeen); reason != "" {
		return reason
	}
	rb.commit()
	return ""
}

func jsonTypeName(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// value parses the value at b[i] into column col's cell. It returns the
// index after the value and a reject reason ("" when fine).
func (d *jsonDecoder) value(col int, b []byte, i int) (int, string) {
	rb := d.rb
	c := &rb.cols[col]
	v := &rb.cells[col]
	if i >= len(b) {
		return i, syntaxErr(b, i, "expected a value")
	}
	switch ch := b[i]; {
	case ch == '"' && c.kind == kTimestamp:
		// Fast path: a timestamp the parser accepts holds only digits,
		// T, t, Z, z, '-', ':', '.', '+' and space, so it ends at the first
		// quote and is a valid JSON string as it is. Anything else takes
		// the general path below, with its reasons.
		if q := bytes.IndexByte(b[i+1:], '"'); q >= 0 {
			if t, ok := c.ts.parse(b[i+1 : i+1+q]); ok {
				v.i, v.set = t, true
				return i + q + 2, ""
			}
		}
		return d.stringValue(col, b, i)
	case ch == '"':
		if c.kind == kString {
			// Fast path: a string without escapes or non-ASCII bytes is
			// the value as it is.
			if end, flags := scanString(b, i); end >= 0 && flags == 0 {
				v.s, v.set = b[i+1:end-1], true
				return end, ""
			}
		}
		return d.stringValue(col, b, i)
	case ch == '-' || isDigit(ch):
		if c.kind == kInt64 || c.kind == kInt32 {
			if x, end, ok := quickInt(b, i); ok && (c.kind == kInt64 || int64(int32(x)) == x) {
				v.i, v.set = x, true
				return end, ""
			}
		}
		end := scanNumber(b, i)
		if end < 0 {
			return i, syntaxErr(b, i, "invalid number")
		}
		if c.kind == kBool || c.kind == kTimestamp {
			return end, fmt.Sprintf("column %s: expected %s, got number %s", c.quote, expectName(c.kind), clip(b[i:end]))
		}
		return end, rb.setText(col, b[i:end])
	case ch == 't' || ch == 'f':
		lit := "false"
		if ch == 't' {
			lit = "true"
		}
		end := i + len(lit)
		if end > len(b) || string(b[i:end]) != lit {
			return i, syntaxErr(b, i, "invalid literal")
		}
		switch c.kind {
		case kBool:
			v.b, v.set = ch == 't', true
		case kString:
			v.s, v.set = b[i:end], true
		default:
			return end, fmt.Sprintf("column %s: expected %s, got boolean", c.quote, expectName(c.kind))
		}
		return end, ""
	case ch == 'n':
		if i+4 > len(b) || string(b[i:i+4]) != "null" {
			return i, syntaxErr(b, i, "invalid literal")
		}
		v.set = false
		return i + 4, ""
	case ch == '{' || ch == '[':
		end := skipValue(b, i, 1)
		if end < 0 {
			return i, syntaxErr(b, -end-1, "invalid value")
		}
		return end, fmt.Sprintf("column %s: expected %s, got %s", c.quote, expectName(c.kind), jsonTypeName(ch))
	}
	return i, syntaxErr(b, i, "expected a value")
}

// stringValue parses the JSON string at b[i] into column col's cell.
func (d *jsonDecoder) stringValue(col int, b []byte, i int) (int, string) {
	end, flags := scanString(b, i)
	if end < 0 {
		return i, syntaxErr(b, i, "invalid string")
	}
	s := b[i+1 : end-1]
	if flags&strBadUTF8 != 0 {
		return end, d.rb.badUTF8(col, s)
	}
	if flags != 0 {
		s = unquote(&d.bufs[col], s, flags)
	}
	return end, d.rb.setText(col, s)
}

func expectName(k kind) string {
	switch k {
	case kTimestamp:
		return "a timestamp string"
	case kBool:
		return "a boolean"
	case kString:
		return "a string"
	}
	return "a number"
}

func skipWS(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// plainStr marks bytes that need no attention inside a JSON string.
var plainStr = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	strEscaped = 1 << iota
	strNonASCII
	strBadUTF8 // invalid UTF-8 bytes or a lone surrogate escape
)

func isHex(c byte) bool {
	return isDigit(c) || (c|0x20)-'a' < 6
}

// scanString validates the string starting at b[i] == '"' and returns the
// index after its closing quote (-1 when invalid) and flags telling whether
// it holds escapes or non-ASCII bytes and whether it is not valid UTF-8
// (strBadUTF8). Only non-ASCII bytes and \u escapes pay for the UTF-8 check.
func scanString(b []byte, i int) (int, int) {
	flags := 0
	j := i + 1
	for {
		if j+8 <= len(b) {
			// Eight bytes at a time: skip to the first that needs
			// attention.
			m := specialBytes(binary.LittleEndian.Uint64(b[j:]))
			if m == 0 {
				j += 8
				continue
			}
			j += bits.TrailingZeros64(m) >> 3
		} else {
			for j < len(b) && plainStr[b[j]] {
				j++
			}
			if j >= len(b) {
				return -1, 0
			}
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, flags
		case c == '\\':
			flags |= strEscaped
			j++
			if j >= len(b) {
				return -1, 0
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				r := getu4(b[j-1:])
				if r < 0 {
					return -1, 0
				}
				j += 5
				if utf16.IsSurrogate(r) {
					// Valid only as a high surrogate followed by an
					// escaped low one.
					if r2 := getu4(b[j:]); r >= 0xDC00 || r2 < 0xDC00 || r2 > 0xDFFF {
						flags |= strBadUTF8
					} else {
						j += 6
					}
				}
			default:
				return -1, 0
			}
		case c < 0x20:
			return -1, 0
		default:
			flags |= strNonASCII
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 {
				flags |= strBadUTF8
			}
			j += size
		}
	}
}

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// specialBytes returns the high bit of every byte of the little-endian
// word x that is not plain inside a JSON string ('"', '\\', a control
// character or a non-ASCII byte); 0 when all eight are plain. The lowest
// set bit is exact (a borrow only runs upwards from a special byte), which
// is all scanString uses.
func specialBytes(x uint64) uint64 {
	q := x ^ (lowBits * '"')
	bs := x ^ (lowBits * '\\')
	return ((q-lowBits)&^q | (bs-lowBits)&^bs | (x-lowBits*0x20)&^x | x) & highBits
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case isDigit(c):
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquote decodes the body of a JSON string (without quotes) that
// scanString accepted without strBadUTF8, reusing *buf. A string without
// escapes is returned as is.
func unquote(buf *[]byte, s []byte, flags int) []byte {
	if flags&strEscaped == 0 {
		return s
	}
	dst := (*buf)[:0]
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch s[r+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					// scanString saw the low half.
					rr = utf16.DecodeRune(rr, getu4(s[r:]))
					r += 6
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, s[r+1])
			}
			r += 2
		default: // ASCII or part of a valid UTF-8 sequence
			dst = append(dst, c)
			r++
		}
	}
	*buf = dst
	return dst
}

// quickInt parses the JSON integer at b[i] when it is plain:
// -?[1-9][0-9]{0,17} not followed by a fraction or exponent (or just "0").
// ok=false leaves every other spelling to scanNumber and parseInt.
func quickInt(b []byte, i int) (x int64, end int, ok bool) {
	j := i
	neg := b[j] == '-'
	if neg {
		j++
	}
	st := j
	for j < len(b) && j-st < 18 && isDigit(b[j]) {
		x = x*10 + int64(b[j]-'0')
		j++
	}
	n := j - st
	if n == 0 || (b[st] == '0' && n > 1) || (j < len(b) && (isDigit(b[j]) || b[j] == '.' || b[j]|0x20 == 'e')) {
		return 0, 0, false
	}
	if neg {
		x = -x
	}
	return x, j, true
}

// scanNumber validates a JSON number at b[i] and returns the index after it,
// or -1.
func scanNumber(b []byte, i int) int {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	if j >= len(b) {
		return -1
	}
	switch {
	case b[j] == '0':
		j++
	case b[j] >= '1' && b[j] <= '9':
		for j < len(b) && isDigit(b[j]) {
			j++
		}
	default:
		return -1
	}
	if j < len(b) && b[j] == '.' {
		j++
		st := j
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		if j == st {
			return -1
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		st := j
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		if j == st {
			return -1
		}
	}
	return j
}

// skipValue validates the JSON value at b[i] and returns the index after it.
// On error it returns -(pos+1) where pos is the offending byte.
func skipValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -(i + 1)
	}
	switch c := b[i]; {
	case c == '"':
		end, _ := scanString(b, i)
		if end < 0 {
			return -(i + 1)
		}
		return end
	case c == '-' || isDigit(c):
		end := scanNumber(b, i)
		if end < 0 {
			return -(i + 1)
		}
		return end
	case c == 't' || c == 'f' || c == 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		if i+len(lit) > len(b) || string(b[i:i+len(lit)]) != lit {
			return -(i + 1)
		}
		return i + len(lit)
	case c == '{' || c == '[':
		if depth >= maxJSONDepth {
			return -(i + 1)
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return -(i + 1)
				}
				end, _ := scanString(b, i)
				if end < 0 {
					return -(i + 1)
				}
				i = skipWS(b, end)
				if i >= len(b) || b[i] != ':' {
					return -(i + 1)
				}
				i = skipWS(b, i+1)
			}
			if i = skipValue(b, i, depth+1); i < 0 {
				return i
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return -(i + 1)
			}
			if b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if b[i] == closer {
				return i + 1
			}
			return -(i + 1)
		}
	}
	return -(i + 1)
}
