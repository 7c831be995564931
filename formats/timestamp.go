package formats

// Text and number parsing shared by the JSON and CSV decoders. All functions
// work on byte slices and never allocate.

import (
	"math"
	"strconv"
	"unsafe"
)

// bstr views b as a string without copying. The result must not outlive b's
// current contents.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func isDigit(c byte) bool { return c-'0' < 10 }

// digits2 parses exactly two ASCII digits at b[i:].
func digits2(b []byte, i int) (int64, bool) {
	if i+2 > len(b) || !isDigit(b[i]) || !isDigit(b[i+1]) {
		return 0, false
	}
	return int64(b[i]-'0')*10 + int64(b[i+1]-'0'), true
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

var monthDays = [13]int64{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// daysFromCivil returns days since 1970-01-01 of a proleptic Gregorian date
// (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := m + 9
	if m > 2 {
		mp = m - 3
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// parseTimestamp parses "YYYY-MM-DD[T| ]hh:mm:ss[.frac][zone]" into
// microseconds since the Unix epoch. zone is Z, z, ±hh:mm, ±hhmm or ±hh; no
// zone means UTC. Fraction digits beyond microseconds are truncated.
func parseTimestamp(b []byte) (int64, bool) {
	var c tsCache
	return c.parse(b)
}

// tsCache is parseTimestamp remembering the last "YYYY-MM-DD?hh:mm" it
// parsed: consecutive rows of a file mostly share their minute, which then
// costs one 16-byte comparison instead of parsing and validating the date.
type tsCache struct {
	prefix [16]byte
	secs   int64 // seconds since the epoch at the start of prefix's minute
	ok     bool
}

// parse is parseTimestamp.
func (c *tsCache) parse(b []byte) (int64, bool) {
	if len(b) < 19 || b[16] != ':' {
		return 0, false
	}
	var secs int64
	if c.ok && string(b[:16]) == string(c.prefix[:]) {
		secs = c.secs
	} else {
		var ok bool
		if secs, ok = parseMinute(b); !ok {
			return 0, false
		}
		copy(c.prefix[:], b[:16])
		c.secs, c.ok = secs, true
	}
	s, ok := digits2(b, 17)
	if !ok || s > 59 {
		return 0, false
	}
	i := 19
	var frac int64
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		scale := int64(100000)
		for i < len(b) && isDigit(b[i]) {
			frac += int64(b[i]-'0') * scale
			scale /= 10
			i++
		}
		if i == start {
			return 0, false
		}
	}
	var off int64
	if i < len(b) {
		switch b[i] {
		case 'Z', 'z':
			i++
		case '+', '-':
			sign := int64(1)
			if b[i] == '-' {
				sign = -1
			}
			oh, ok := digits2(b, i+1)
			if !ok || oh > 23 {
				return 0, false
			}
			i += 3
			var om int64
			if i < len(b) {
				if b[i] == ':' {
					i++
				}
				if om, ok = digits2(b, i); !ok || om > 59 {
					return 0, false
				}
				i += 2
			}
			off = sign * (oh*3600 + om*60)
		default:
			return 0, false
		}
	}
	if i != len(b) {
		return 0, false
	}
	return (secs+s-off)*1_000_000 + frac, true
}

// parseMinute parses and validates "YYYY-MM-DD[T| ]hh:mm" at the start of b
// (at least 16 bytes) into seconds since the epoch.
func parseMinute(b []byte) (int64, bool) {
	if b[4] != '-' || b[7] != '-' || b[13] != ':' {
		return 0, false
	}
	if c := b[10]; c != 'T' && c != 't' && c != ' ' {
		return 0, false
	}
	y1, ok1 := digits2(b, 0)
	y2, ok2 := digits2(b, 2)
	mo, ok3 := digits2(b, 5)
	d, ok4 := digits2(b, 8)
	h, ok5 := digits2(b, 11)
	mi, ok6 := digits2(b, 14)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return 0, false
	}
	y := y1*100 + y2
	if mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 {
		return 0, false
	}
	md := monthDays[mo]
	if mo == 2 && isLeap(y) {
		md = 29
	}
	if d > md {
		return 0, false
	}
	return daysFromCivil(y, mo, d)*86400 + h*3600 + mi*60, true
}

// number is the split form of a JSON-number-like decimal.
type number struct {
	neg       bool
	intDigits []byte
	frac      []byte
	exp       int64 // clamped to ±1e6
	hasExp    bool
}

// splitNumber parses -?digits(.digits)?([eE][+-]?digits)? (leading zeros are
// allowed here; the JSON scanner enforces JSON's stricter grammar itself).
func splitNumber(b []byte) (number, bool) {
	var n number
	i := 0
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		n.neg = b[i] == '-'
		i++
	}
	st := i
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	n.intDigits = b[st:i]
	if len(n.intDigits) == 0 {
		return n, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		st = i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		n.frac = b[st:i]
		if len(n.frac) == 0 {
			return n, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		n.hasExp = true
		i++
		eneg := false
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			eneg = b[i] == '-'
			i++
		}
		st = i
		for i < len(b) && isDigit(b[i]) {
			if n.exp < 1_000_000 {
				n.exp = n.exp*10 + int64(b[i]-'0')
			}
			i++
		}
		if i == st {
			return n, false
		}
		if eneg {
			n.exp = -n.exp
		}
	}
	return n, i == len(b)
}

type intErr uint8

const (
	intOK intErr = iota
	intSyntax
	intFraction
	intRange
)

// parseInt parses a decimal integer. Fast path: plain digits. Otherwise the
// value must be exactly integral ("1.0" and "1e3" are, "1.5" is not) and fit
// int64.
func parseInt(b []byte) (int64, intErr) {
	if n := len(b); n > 0 && n <= 18 {
		var v int64
		i := 0
		neg := b[0] == '-'
		if neg {
			i = 1
		}
		if i < n {
			for ; i < n; i++ {
				c := b[i] - '0'
				if c > 9 {
					goto slow
				}
				v = v*10 + int64(c)
			}
			if neg {
				v = -v
			}
			return v, intOK
		}
	}
slow:
	num, ok := splitNumber(b)
	if !ok {
		return 0, intSyntax
	}
	digits := make([]byte, 0, 24)
	digits = append(digits, num.intDigits...)
	digits = append(digits, num.frac...)
	e10 := num.exp - int64(len(num.frac))
	// strip leading zeros
	k := 0
	for k < len(digits) && digits[k] == '0' {
		k++
	}
	digits = digits[k:]
	if len(digits) == 0 {
		return 0, intOK
	}
	for e10 < 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		e10++
	}
	if e10 < 0 {
		return 0, intFraction
	}
	if int64(len(digits))+e10 > 19 {
		return 0, intRange
	}
	var u uint64
	for _, c := range digits {
		u = u*10 + uint64(c-'0')
	}
	for ; e10 > 0; e10-- {
		u *= 10
	}
	if num.neg {
		if u > 1<<63 {
			return 0, intRange
		}
		return -int64(u), intOK
	}
	if u > math.MaxInt64 {
		return 0, intRange
	}
	return int64(u), intOK
}

// parseEpoch parses an epoch number in unit (1 = microseconds, 1000 =
// milliseconds, 1e6 = seconds) into microseconds. A decimal fraction is
// allowed and truncated toward zero below one microsecond.
func parseEpoch(b []byte, unitMicros int64) (int64, bool) {
	if unitMicros == 1 {
		v, e := parseInt(b)
		return v, e == intOK
	}
	num, ok := splitNumber(b)
	if !ok || num.hasExp || len(num.intDigits) > 19 {
		return 0, false
	}
	ip, err := strconv.ParseUint(bstr(num.intDigits), 10, 63)
	if err != nil || ip > uint64(math.MaxInt64/unitMicros) {
		return 0, false
	}
	v := int64(ip) * unitMicros
	scale := unitMicros / 10
	for _, c := range num.frac {
		if scale == 0 {
			break
		}
		v += int64(c-'0') * scale
		scale /= 10
	}
	if num.neg {
		v = -v
	}
	return v, true
}
