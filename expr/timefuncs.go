package expr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Date and time functions read a timestamp of any unit as an instant and
// compute in UTC (a column's time zone label does not change the result).
// Calendar fields come from integer arithmetic on the proleptic Gregorian
// calendar (civil / daysFromCivil), not from time.Time per row.

var (
	truncUnits = []string{"second", "minute", "hour", "day", "week", "month", "quarter", "year"}
	partFields = []string{"year", "quarter", "month", "day", "doy", "dow", "isodow", "hour", "minute", "second", "epoch"}
)

func (c *compiler) dateTruncFunc(f fcall) (node, error) {
	unit, null, err := c.constString(f, 0, "unit")
	if err != nil {
		return nil, err
	}
	ts, err := c.arg(f, 1, "ts", typ{k: kTimestamp})
	if err != nil {
		return nil, err
	}
	t := ts.typ()
	if null {
		return &constNode{v: nullConst(t)}, nil
	}
	unit = strings.ToLower(unit)
	if err := c.choice(f, 0, "unit", unit, truncUnits); err != nil {
		return nil, err
	}
	fn := truncKernel(unit, unitFactor(t.unit))
	return c.done(f.at, &unaryNode{x: ts, t: t, fn: func(in, out *vec) {
		for i, v := range in.i[:len(out.i)] {
			out.i[i] = fn(v)
		}
	}}, ts)
}

// truncKernel returns the function that truncates a timestamp of f ticks per
// second to the start of its unit (weeks start on Monday, like ISO 8601 and
// PostgreSQL).
func truncKernel(unit string, f int64) func(v int64) int64 {
	period := func(p int64) func(v int64) int64 {
		return func(v int64) int64 { return v - floorMod(v, p) }
	}
	dayTicks := 86400 * f
	switch unit {
	case "second":
		return period(f)
	case "minute":
		return period(60 * f)
	case "hour":
		return period(3600 * f)
	case "day":
		return period(dayTicks)
	case "week":
		return func(v int64) int64 {
			d := floorDiv(v, dayTicks)
			return (d - floorMod(d+3, 7)) * dayTicks // 1970-01-01 was a Thursday
		}
	case "month", "quarter":
		q := unit == "quarter"
		return func(v int64) int64 {
			y, m, _ := civil(floorDiv(v, dayTicks))
			if q {
				m = (m-1)/3*3 + 1
			}
			return daysFromCivil(y, m, 1) * dayTicks
		}
	}
	return func(v int64) int64 { // year
		y, _, _ := civil(floorDiv(v, dayTicks))
		return daysFromCivil(y, 1, 1) * dayTicks
	}
}

func (c *compiler) datePartFunc(f fcall) (node, error) {
	field, null, err := c.constString(f, 0, "field")
	if err != nil {
		return nil, err
	}
	ts, err := c.arg(f, 1, "ts", typ{k: kTimestamp})
	if err != nil {
		return nil, err
	}
	if null {
		return &constNode{v: nullConst(tInt)}, nil
	}
	field = strings.ToLower(field)
	if err := c.choice(f, 0, "field", field, partFields); err != nil {
		return nil, err
	}
	fn := partKernel(field, unitFactor(ts.typ().unit))
	return c.done(f.at, &unaryNode{x: ts, t: tInt, fn: func(in, out *vec) {
		for i, v := range in.i[:len(out.i)] {
			out.i[i] = fn(v)
		}
	}}, ts)
}

// partKernel returns the function that extracts field from a timestamp of f
// ticks per second. dow is 0 (Sunday) to 6, isodow 1 (Monday) to 7, doy 1 to
// 366, epoch whole seconds since 1970 (rounded down).
func partKernel(field string, f int64) func(v int64) int64 {
	sod := func(v int64) int64 { return floorMod(floorDiv(v, f), 86400) }
	day := func(v int64) int64 { return floorDiv(v, 86400*f) }
	switch field {
	case "hour":
		return func(v int64) int64 { return sod(v) / 3600 }
	case "minute":
		return func(v int64) int64 { return sod(v) / 60 % 60 }
	case "second":
		return func(v int64) int64 { return sod(v) % 60 }
	case "epoch":
		return func(v int64) int64 { return floorDiv(v, f) }
	case "dow":
		return func(v int64) int64 { return floorMod(day(v)+4, 7) }
	case "isodow":
		return func(v int64) int64 { return floorMod(day(v)+3, 7) + 1 }
	case "doy":
		return func(v int64) int64 {
			d := day(v)
			y, _, _ := civil(d)
			return d - daysFromCivil(y, 1, 1) + 1
		}
	case "day":
		return func(v int64) int64 { _, _, dd := civil(day(v)); return int64(dd) }
	case "month":
		return func(v int64) int64 { _, m, _ := civil(day(v)); return int64(m) }
	case "quarter":
		return func(v int64) int64 { _, m, _ := civil(day(v)); return int64((m-1)/3 + 1) }
	}
	return func(v int64) int64 { y, _, _ := civil(day(v)); return y } // year
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m != 0 && ((m < 0) != (b < 0)) {
		m += b
	}
	return m
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil inverse).
func civil(days int64) (y int64, m, d int) {
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d.
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mm := int64(m) + 9
	if m > 2 {
		mm = int64(m) - 3
	}
	doy := (153*mm+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// strftime directives format_time supports.
const strftimeHelp = "%Y %m %d %H %M %S %f (microseconds) %j %y %a %A %b %B %p %I %u %w %s %Z %z %F %T %%"

var (
	dayNames   = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	monthNames = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

// layoutOp is one piece of a compiled strftime layout: a literal, or a directive.
type layoutOp struct {
	lit string
	dir byte // 0 for a literal
}

// compileLayout parses a strftime layout once.
func compileLayout(layout string) ([]layoutOp, error) {
	var ops []layoutOp
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			ops = append(ops, layoutOp{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(layout); i++ {
		ch := layout[i]
		if ch != '%' {
			lit.WriteByte(ch)
			continue
		}
		if i+1 == len(layout) {
			return nil, fmt.Errorf("a lone %% ends the layout (write %%%% for a percent sign)")
		}
		i++
		d := layout[i]
		switch d {
		case '%':
			lit.WriteByte('%')
		case 'F':
			flush()
			ops = append(ops, layoutOp{dir: 'Y'}, layoutOp{lit: "-"}, layoutOp{dir: 'm'}, layoutOp{lit: "-"}, layoutOp{dir: 'd'})
		case 'T':
			flush()
			ops = append(ops, layoutOp{dir: 'H'}, layoutOp{lit: ":"}, layoutOp{dir: 'M'}, layoutOp{lit: ":"}, layoutOp{dir: 'S'})
		case 'Z':
			lit.WriteString("UTC")
		case 'z':
			lit.WriteString("+0000")
		case 'Y', 'm', 'd', 'H', 'M', 'S', 'f', 'j', 'y', 'a', 'A', 'b', 'B', 'p', 'I', 'u', 'w', 's':
			flush()
			ops = append(ops, layoutOp{dir: d})
		default:
			return nil, fmt.Errorf("%%%c is not a supported directive (supported: %s)", d, strftimeHelp)
		}
	}
	flush()
	return ops, nil
}

func (c *compiler) formatTimeFunc(f fcall) (node, error) {
	ts, err := c.arg(f, 0, "ts", typ{k: kTimestamp})
	if err != nil {
		return nil, err
	}
	layout, null, err := c.constString(f, 1, "layout")
	if err != nil {
		return nil, err
	}
	if null {
		return &constNode{v: nullConst(tString)}, nil
	}
	ops, err := compileLayout(layout)
	if err != nil {
		return nil, c.errAt(f.args[1], "format_time() argument 2 (layout): %v", err)
	}
	fps := unitFactor(ts.typ().unit)
	return c.done(f.at, &unaryNode{x: ts, t: tString, fn: func(in, out *vec) {
		var buf []byte
		ends := make([]int, len(out.s))
		for i, v := range in.i[:len(out.s)] {
			if in.validAt(i) {
				buf = appendTime(buf, v, fps, ops)
			}
			ends[i] = len(buf)
		}
		cutStrings(string(buf), ends, out.s)
	}}, ts)
}

// appendTime formats the timestamp v (f ticks per second) by ops.
func appendTime(buf []byte, v, f int64, ops []layoutOp) []byte {
	secs := floorDiv(v, f)
	sub := v - secs*f
	days := floorDiv(secs, 86400)
	sod := secs - days*86400
	y, m, d := civil(days)
	for _, op := range ops {
		switch op.dir {
		case 0:
			buf = append(buf, op.lit...)
		case 'Y':
			if y >= 0 && y < 10000 {
				buf = appendPad(buf, y, 4)
			} else {
				buf = strconv.AppendInt(buf, y, 10)
			}
		case 'y':
			buf = appendPad(buf, floorMod(y, 100), 2)
		case 'm':
			buf = appendPad(buf, int64(m), 2)
		case 'd':
			buf = appendPad(buf, int64(d), 2)
		case 'H':
			buf = appendPad(buf, sod/3600, 2)
		case 'I':
			h := sod / 3600 % 12
			if h == 0 {
				h = 12
			}
			buf = appendPad(buf, h, 2)
		case 'p':
			if sod < 43200 {
				buf = append(buf, "AM"...)
			} else {
				buf = append(buf, "PM"...)
			}
		case 'M':
			buf = appendPad(buf, sod/60%60, 2)
		case 'S':
			buf = appendPad(buf, sod%60, 2)
		case 'f':
			var us int64
			if f >= 1_000_000 {
				us = sub / (f / 1_000_000)
			} else {
				us = sub * (1_000_000 / f)
			}
			buf = appendPad(buf, us, 6)
		case 'j':
			buf = appendPad(buf, days-daysFromCivil(y, 1, 1)+1, 3)
		case 'a':
			buf = append(buf, dayNames[floorMod(days+4, 7)][:3]...)
		case 'A':
			buf = append(buf, dayNames[floorMod(days+4, 7)]...)
		case 'b':
			buf = append(buf, monthNames[m-1][:3]...)
		case 'B':
			buf = append(buf, monthNames[m-1]...)
		case 'u':
			buf = strconv.AppendInt(buf, floorMod(days+3, 7)+1, 10)
		case 'w':
			buf = strconv.AppendInt(buf, floorMod(days+4, 7), 10)
		case 's':
			buf = strconv.AppendInt(buf, secs, 10)
		}
	}
	return buf
}

// appendPad appends a non-negative x with at least width digits.
func appendPad(buf []byte, x int64, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], x, 10)
	for k := len(s); k < width; k++ {
		buf = append(buf, '0')
	}
	return append(buf, s...)
}

// tsMicro is the result type of functions that make timestamps.
var tsMicro = tTimestamp(arrow.Microsecond, "UTC")
