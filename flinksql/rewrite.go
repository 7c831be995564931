package flinksql

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The SELECT statements are parsed by vitess's sqlparser (a MySQL grammar).
// Flink's dialect differs from MySQL's in a few constructs that the MySQL
// grammar does not have, so a SELECT's tokens are first rewritten into
// MySQL text that keeps the meaning, each piece remembering the file offset
// it came from (errors from the parser are mapped back through it):
//
//   - TABLE(TUMBLE|HOP|CUMULATE|SESSION(TABLE t, DESCRIPTOR(c), INTERVAL ...))
//     becomes a table named __floe_tvf_<n>; the call is kept aside (tvfCall).
//   - INTERVAL 'n' UNIT becomes __floe_interval(<microseconds>).
//   - CAST(x AS TYPE) becomes __floe_cast_<type>(x) (MySQL's CAST knows
//     neither BIGINT nor STRING nor BOOLEAN).
//   - agg(...) FILTER (WHERE c) becomes agg(CASE WHEN c THEN ... END), the
//     SQL standard's definition of FILTER (COUNT(*) counts CASE WHEN c THEN 1 END).
//   - a subquery in FROM without an alias gets one (__floe_sub_<n>): MySQL
//     requires it, Flink does not.
//   - strings are re-quoted for MySQL's lexer (which reads backslash escapes;
//     Flink's strings have none).
//   - FOR SYSTEM_TIME AS OF x (a lookup join) is removed and noted.

// tvfCall is a window table-valued function found in a FROM clause.
type tvfCall struct {
	kind      string // tumble, hop, cumulate, session
	table     string
	tablePos  int
	partition []string // SESSION(TABLE t PARTITION BY k, ...)
	timecol   string
	durations []time.Duration
	off       int
}

type segment struct{ out, orig int }

// rewritten is a SELECT's MySQL text with its offset map.
type rewritten struct {
	text     strings.Builder
	segs     []segment
	tvfs     map[string]*tvfCall
	systime  map[string]bool // aliases/tables joined FOR SYSTEM_TIME AS OF
	nsub     int
	lastOrig int
}

func (r *rewritten) emit(orig int, s string) {
	r.segs = append(r.segs, segment{out: r.text.Len(), orig: orig})
	r.text.WriteString(s)
	r.text.WriteByte(' ')
	r.lastOrig = orig
}

// origOf maps an offset in the rewritten text to a file offset.
func (r *rewritten) origOf(out int) int {
	best := 0
	if len(r.segs) > 0 {
		best = r.segs[0].orig
	}
	for _, s := range r.segs {
		if s.out > out {
			break
		}
		best = s.orig
	}
	return best
}

// mysqlString quotes s for MySQL's lexer.
func mysqlString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// intervalUnits are Flink's interval units (singular and plural).
var intervalUnits = map[string]time.Duration{
	"microsecond": time.Microsecond, "millisecond": time.Millisecond,
	"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
}

// parseInterval reads INTERVAL 'n' UNIT at toks[i] (toks[i] is INTERVAL);
// it returns the duration and the index after it.
func parseInterval(toks []token, i int) (time.Duration, int, error) {
	if i+2 >= len(toks) || (toks[i+1].kind != tString && toks[i+1].kind != tNumber) || toks[i+2].kind != tIdent {
		return 0, i, &lexError{toks[i].off, "INTERVAL: want INTERVAL 'n' UNIT (SECOND, MINUTE, HOUR, DAY, MILLISECOND)"}
	}
	unit := strings.ToLower(toks[i+2].text)
	unit = strings.TrimSuffix(unit, "s")
	d, ok := intervalUnits[unit]
	if !ok {
		return 0, i, &lexError{toks[i+2].off, fmt.Sprintf("INTERVAL unit %s: want SECOND, MINUTE, HOUR, DAY, MILLISECOND or MICROSECOND (year-month intervals and compound units such as MINUTE TO SECOND are not supported)", toks[i+2].text)}
	}
	j := i + 3
	if j < len(toks) && toks[j].isP("(") { // SECOND(3): a precision, ignored
		k := j
		for k < len(toks) && !toks[k].isP(")") {
			if toks[k].kind == tEOF {
				return 0, i, &lexError{toks[j].off, "INTERVAL: unclosed precision ("}
			}
			k++
		}
		if k >= len(toks) {
			return 0, i, &lexError{toks[j].off, "INTERVAL: unclosed precision ("}
		}
		j = k + 1
	}
	if j < len(toks) && toks[j].is("to") {
		return 0, i, &lexError{toks[j].off, "INTERVAL ... TO ...: compound interval units are not supported; write INTERVAL 'n' SECOND"}
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(toks[i+1].text), 64)
	if err != nil || n < 0 {
		return 0, i, &lexError{toks[i+1].off, fmt.Sprintf("INTERVAL %q: want a non-negative number", toks[i+1].text)}
	}
	dur := time.Duration(n * float64(d))
	if dur%time.Microsecond != 0 {
		return 0, i, &lexError{toks[i+1].off, "INTERVAL: below a microsecond"}
	}
	return dur, j, nil
}

// match returns the index of the ")" closing the "(" at toks[i].
func match(toks []token, i int) (int, error) {
	depth := 0
	for j := i; j < len(toks); j++ {
		switch {
		case toks[j].isP("("):
			depth++
		case toks[j].isP(")"):
			depth--
			if depth == 0 {
				return j, nil
			}
		case toks[j].kind == tEOF:
			return 0, &lexError{toks[i].off, "unclosed parenthesis"}
		}
	}
	return 0, &lexError{toks[i].off, "unclosed parenthesis"}
}

// castTypes maps Flink CAST target types to floe cast types.
var castTypes = map[string]string{
	"bigint": "int64", "int": "int64", "integer": "int64", "smallint": "int64", "tinyint": "int64",
	"double": "float64", "float": "float64", "real": "float64", "decimal": "float64", "numeric": "float64",
	"string": "string", "varchar": "string", "char": "string",
	"boolean": "bool", "timestamp": "timestamp", "timestamp_ltz": "timestamp",
}

var aggNames = map[string]bool{"count": true, "sum": true, "min": true, "max": true, "avg": true}

// rewriteSelect turns toks (a query, ending with tEOF) into MySQL text.
func rewriteSelect(toks []token, base int) (*rewritten, error) {
	r := &rewritten{tvfs: map[string]*tvfCall{}, systime: map[string]bool{}}
	if err := r.run(toks, 0, len(toks)-1); err != nil {
		return nil, err
	}
	_ = base
	return r, nil
}

// run rewrites toks[i:end].
func (r *rewritten) run(toks []token, i, end int) error {
	for i < end {
		t := toks[i]
		switch {
		case t.is("table") && i+2 < end && toks[i+1].isP("(") && toks[i+2].kind == tIdent &&
			(toks[i+2].is("tumble") || toks[i+2].is("hop") || toks[i+2].is("cumulate") || toks[i+2].is("session")):
			close, err := match(toks, i+1)
			if err != nil {
				return err
			}
			call, err := parseTVF(toks[i+2 : close])
			if err != nil {
				return err
			}
			call.off = t.off
			name := fmt.Sprintf("__floe_tvf_%d", len(r.tvfs))
			r.tvfs[name] = call
			r.emit(t.off, name)
			i = close + 1
		case t.is("interval"):
			d, j, err := parseInterval(toks, i)
			if err != nil {
				return err
			}
			r.emit(t.off, fmt.Sprintf("__floe_interval(%d)", d.Microseconds()))
			i = j
		case t.is("cast") && toks[i+1].isP("("):
			close, err := match(toks, i+1)
			if err != nil {
				return err
			}
			as := -1
			depth := 0
			for j := i + 1; j < close; j++ {
				switch {
				case toks[j].isP("("):
					depth++
				case toks[j].isP(")"):
					depth--
				case depth == 1 && toks[j].is("as"):
					as = j
				}
			}
			if as < 0 || as+1 >= close || toks[as+1].kind != tIdent {
				return &lexError{t.off, "CAST: want CAST(expression AS type)"}
			}
			typ := strings.ToLower(toks[as+1].text)
			ft, ok := castTypes[typ]
			if !ok {
				return &lexError{toks[as+1].off, fmt.Sprintf("CAST AS %s: unsupported type (supported: BIGINT, INT, DOUBLE, FLOAT, DECIMAL, STRING, VARCHAR, CHAR, BOOLEAN, TIMESTAMP, TIMESTAMP_LTZ)", toks[as+1].text)}
			}
			r.emit(t.off, "__floe_cast_"+ft+"(")
			if err := r.run(toks, i+2, as); err != nil {
				return err
			}
			r.emit(toks[close].off, ")")
			i = close + 1
		case t.kind == tIdent && aggNames[strings.ToLower(t.text)] && toks[i+1].isP("("):
			close, err := match(toks, i+1)
			if err != nil {
				return err
			}
			if close+2 < end && toks[close+1].is("filter") && toks[close+2].isP("(") {
				fclose, err := match(toks, close+2)
				if err != nil {
					return err
				}
				if !toks[close+3].is("where") {
					return &lexError{toks[close+3].off, "FILTER: want FILTER (WHERE condition)"}
				}
				r.emit(t.off, t.text+"(")
				a := i + 2
				if toks[a].is("distinct") {
					r.emit(toks[a].off, "DISTINCT")
					a++
				}
				r.emit(toks[close+1].off, "CASE WHEN (")
				if err := r.run(toks, close+4, fclose); err != nil {
					return err
				}
				r.emit(toks[close+1].off, ") THEN")
				if a+1 == close && toks[a].isP("*") {
					r.emit(toks[a].off, "1")
				} else if err := r.run(toks, a, close); err != nil {
					return err
				}
				r.emit(toks[close].off, "END )")
				i = fclose + 1
				continue
			}
			r.emit(t.off, t.text)
			i++
		case t.isP("(") && i > 0 && (toks[i-1].is("from") || toks[i-1].is("join") || toks[i-1].isP(",")) && toks[i+1].is("select"):
			close, err := match(toks, i)
			if err != nil {
				return err
			}
			r.emit(t.off, "(")
			if err := r.run(toks, i+1, close); err != nil {
				return err
			}
			r.emit(toks[close].off, ")")
			nt := toks[close+1]
			if nt.kind == tEOF || nt.isP(")") || nt.isP(",") || nt.is("where") || nt.is("group") || nt.is("order") ||
				nt.is("join") || nt.is("inner") || nt.is("left") || nt.is("right") || nt.is("on") || nt.is("having") || nt.is("union") || nt.is("limit") {
				r.nsub++
				r.emit(nt.off, fmt.Sprintf("AS __floe_sub_%d", r.nsub))
			}
			i = close + 1
		case t.is("for") && i+4 < end && toks[i+1].is("system_time") && toks[i+2].is("as") && toks[i+3].is("of"):
			// FOR SYSTEM_TIME AS OF <col or qualified col>: skip it.
			j := i + 4
			for j < end && (toks[j].kind == tIdent || toks[j].kind == tQuoted || toks[j].isP(".")) && !toks[j].is("as") && !toks[j].is("on") {
				j++
			}
			if i > 0 {
				r.systime[strings.ToLower(toks[i-1].text)] = true
			}
			if toks[j].is("as") && j+1 < end {
				r.systime[strings.ToLower(toks[j+1].text)] = true
			}
			i = j
		case t.isP("||"):
			return &lexError{t.off, "||: string concatenation is not supported by the SQL front end yet; write CONCAT(a, b)"}
		case t.kind == tString:
			r.emit(t.off, mysqlString(t.text))
			i++
		case t.kind == tQuoted:
			r.emit(t.off, "`"+t.text+"`")
			i++
		default:
			r.emit(t.off, t.text)
			i++
		}
	}
	return nil
}

// parseTVF reads TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL ...[, INTERVAL ...])
// from toks (the name through the closing parenthesis, exclusive of the
// outer TABLE( ... )).
func parseTVF(toks []token) (*tvfCall, error) {
	c := &tvfCall{kind: strings.ToLower(toks[0].text)}
	if len(toks) < 2 || !toks[1].isP("(") {
		return nil, &lexError{toks[0].off, c.kind + ": want " + strings.ToUpper(c.kind) + "(TABLE t, DESCRIPTOR(col), INTERVAL ...)"}
	}
	close, err := match(toks, 1)
	if err != nil {
		return nil, err
	}
	// split the arguments at depth-1 commas
	var args [][]token
	start, depth := 2, 0
	for j := 2; j <= close; j++ {
		switch {
		case toks[j].isP("("):
			depth++
		case toks[j].isP(")") && depth > 0:
			depth--
		case depth == 0 && (toks[j].isP(",") || j == close):
			args = append(args, toks[start:j])
			start = j + 1
		}
	}
	usage := fmt.Sprintf("%s: want %s(TABLE t, DESCRIPTOR(time_col), INTERVAL ...)", strings.ToUpper(c.kind), strings.ToUpper(c.kind))
	for _, a := range args {
		if len(a) >= 2 && a[1].isP("=>") { // named argument: DATA => TABLE t
			a = a[2:]
		}
		if len(a) == 0 {
			return nil, &lexError{toks[0].off, usage}
		}
		switch {
		case a[0].is("table"):
			if len(a) < 2 || (a[1].kind != tIdent && a[1].kind != tQuoted) {
				return nil, &lexError{a[0].off, usage + ": TABLE takes a table or view name"}
			}
			c.table, c.tablePos = a[1].text, a[1].off
			rest := a[2:]
			if len(rest) >= 2 && rest[0].is("partition") && rest[1].is("by") {
				for _, t := range rest[2:] {
					if t.kind == tIdent || t.kind == tQuoted {
						c.partition = append(c.partition, t.text)
					}
				}
			} else if len(rest) > 0 {
				return nil, &lexError{rest[0].off, usage + ": unexpected " + rest[0].text}
			}
		case a[0].is("descriptor"):
			if len(a) != 4 || !a[1].isP("(") || !a[3].isP(")") {
				return nil, &lexError{a[0].off, usage + ": DESCRIPTOR takes one column"}
			}
			c.timecol = a[2].text
		case a[0].is("interval"):
			d, _, err := parseInterval(a, 0)
			if err != nil {
				return nil, err
			}
			c.durations = append(c.durations, d)
		default:
			return nil, &lexError{a[0].off, usage + ": unexpected " + a[0].text}
		}
	}
	if c.table == "" || c.timecol == "" || len(c.durations) == 0 {
		return nil, &lexError{toks[0].off, usage}
	}
	return c, nil
}
