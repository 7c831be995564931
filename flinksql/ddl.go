package flinksql

import (
	"fmt"
	"strings"
	"time"

	"github.com/floe-dev/floe/spec"
)

// cursor walks one statement's tokens.
type cursor struct {
	toks []token
	i    int
}

func (c *cursor) peek() token {
	if c.i >= len(c.toks) {
		return c.toks[len(c.toks)-1] // the statement's tEOF
	}
	return c.toks[c.i]
}
func (c *cursor) next() token {
	t := c.peek()
	if t.kind != tEOF {
		c.i++
	}
	return t
}
func (c *cursor) accept(w string) bool {
	if c.peek().is(w) {
		c.i++
		return true
	}
	return false
}
func (c *cursor) acceptP(p string) bool {
	if c.peek().isP(p) {
		c.i++
		return true
	}
	return false
}
func (c *cursor) expect(w string) error {
	if !c.accept(w) {
		return errAt(c.peek(), "want %s, found %s", strings.ToUpper(w), describe(c.peek()))
	}
	return nil
}
func (c *cursor) expectP(p string) error {
	if !c.acceptP(p) {
		return errAt(c.peek(), "want %q, found %s", p, describe(c.peek()))
	}
	return nil
}
func (c *cursor) ident(what string) (token, error) {
	t := c.peek()
	if t.kind != tIdent && t.kind != tQuoted {
		return t, errAt(t, "want %s, found %s", what, describe(t))
	}
	c.i++
	return t, nil
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the statement"
	case tString:
		return fmt.Sprintf("'%s'", t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

func errAt(t token, format string, args ...any) error {
	return &lexError{t.off, fmt.Sprintf(format, args...)}
}

// column is one column of a CREATE TABLE.
type column struct {
	name  string
	typ   spec.DataType
	flink string
	off   int
	// meta is the metadata key of a METADATA column ("" for a physical
	// column): FROM 'key', or the column's name; metaOff is where it is.
	meta    string
	metaOff int
}

// table is a CREATE TABLE.
type table struct {
	name      string
	off       int
	cols      []column
	wmCol     string
	wmDelay   time.Duration
	hasWM     bool
	opts      map[string]option
	optOrder  []string
	partition []string
	use       string // "source", "sink", "lookup" once used
	node      string // its name in the graph
}

type option struct {
	val string
	off int
}

func (t *table) col(name string) *column {
	for i := range t.cols {
		if t.cols[i].name == name {
			return &t.cols[i]
		}
	}
	for i := range t.cols {
		if strings.EqualFold(t.cols[i].name, name) {
			return &t.cols[i]
		}
	}
	return nil
}

// flinkType maps a Flink SQL type to a floe column type.
func flinkType(c *cursor) (spec.DataType, string, error) {
	t, err := c.ident("a type")
	if err != nil {
		return "", "", err
	}
	name := strings.ToUpper(t.text)
	full := name
	// optional (p) or (p, s)
	if c.peek().isP("(") {
		j, err := match(c.toks, c.i)
		if err != nil {
			return "", "", err
		}
		var parts []string
		for _, x := range c.toks[c.i+1 : j] {
			parts = append(parts, x.text)
		}
		full += "(" + strings.Join(parts, "") + ")"
		c.i = j + 1
	}
	// TIMESTAMP(3) WITH LOCAL TIME ZONE, TIMESTAMP WITHOUT TIME ZONE
	if name == "TIMESTAMP" && (c.peek().is("with") || c.peek().is("without")) {
		for c.peek().is("with") || c.peek().is("without") || c.peek().is("local") || c.peek().is("time") || c.peek().is("zone") {
			c.next()
		}
	}
	switch name {
	case "BIGINT":
		return spec.TypeInt64, full, nil
	case "INT", "INTEGER", "SMALLINT", "TINYINT":
		return spec.TypeInt32, full, nil
	case "DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC", "DEC":
		if name == "DOUBLE" && c.peek().is("precision") {
			c.next()
		}
		return spec.TypeFloat64, full, nil
	case "STRING", "VARCHAR", "CHAR":
		return spec.TypeString, full, nil
	case "BOOLEAN":
		return spec.TypeBool, full, nil
	case "TIMESTAMP", "TIMESTAMP_LTZ":
		return spec.TypeTimestamp, full, nil
	}
	return "", "", errAt(t, "type %s: not supported (BIGINT, INT, SMALLINT, TINYINT, DOUBLE, FLOAT, DECIMAL(p,s), STRING, VARCHAR(n), CHAR(n), BOOLEAN, TIMESTAMP(p), TIMESTAMP_LTZ(p))", t.text)
}

// parseCreateTable reads CREATE [TEMPORARY] TABLE name (...) [PARTITIONED BY (...)] WITH (...).
func parseCreateTable(c *cursor) (*table, error) {
	nt, err := c.ident("a table name")
	if err != nil {
		return nil, err
	}
	tb := &table{name: nt.text, off: nt.off, opts: map[string]option{}}
	if err := c.expectP("("); err != nil {
		return nil, err
	}
	for {
		switch {
		case c.peek().is("watermark"):
			wt := c.next()
			if err := c.expect("for"); err != nil {
				return nil, err
			}
			col, err := c.ident("the watermark's time column")
			if err != nil {
				return nil, err
			}
			if err := c.expect("as"); err != nil {
				return nil, err
			}
			base, err := c.ident("the time column")
			if err != nil {
				return nil, err
			}
			if base.text != col.text {
				return nil, errAt(base, "WATERMARK FOR %s AS %s: the watermark must be %s - INTERVAL '...' UNIT (floe's watermark is the largest time seen minus a bound)", col.text, base.text, col.text)
			}
			var d time.Duration
			if c.acceptP("-") {
				if !c.peek().is("interval") {
					return nil, errAt(c.peek(), "WATERMARK: want %s - INTERVAL 'n' UNIT", col.text)
				}
				dd, j, err := parseInterval(c.toks, c.i)
				if err != nil {
					return nil, err
				}
				d, c.i = dd, j
			}
			if tb.hasWM {
				return nil, errAt(wt, "a table has one WATERMARK")
			}
			tb.wmCol, tb.wmDelay, tb.hasWM = col.text, d, true
		case c.peek().is("primary"):
			// PRIMARY KEY (...) NOT ENFORCED: informational in Flink for files.
			c.next()
			if err := c.expect("key"); err != nil {
				return nil, err
			}
			if !c.peek().isP("(") {
				return nil, errAt(c.peek(), "PRIMARY KEY: want (columns)")
			}
			j, err := match(c.toks, c.i)
			if err != nil {
				return nil, err
			}
			c.i = j + 1
			c.accept("not")
			c.accept("enforced")
		case c.peek().is("constraint"):
			return nil, errAt(c.peek(), "CONSTRAINT: not supported")
		default:
			ct, err := c.ident("a column name")
			if err != nil {
				return nil, err
			}
			if c.peek().is("as") {
				return nil, errAt(c.peek(), "computed column %s: not supported; compute it in the SELECT", ct.text)
			}
			typ, fl, err := flinkType(c)
			if err != nil {
				return nil, err
			}
			nullable := func() error {
				if c.accept("not") {
					return c.expect("null")
				}
				c.accept("null")
				return nil
			}
			if err := nullable(); err != nil {
				return nil, err
			}
			col := column{name: ct.text, typ: typ, flink: fl, off: ct.off}
			if mt := c.peek(); mt.is("metadata") {
				// col TYPE METADATA [FROM 'key'] [VIRTUAL] (Flink): the
				// connector checks the key (kafka.go).
				c.next()
				col.meta, col.metaOff = ct.text, ct.off
				if c.accept("from") {
					k := c.next()
					if k.kind != tString {
						return nil, errAt(k, "METADATA FROM: want a quoted metadata key such as 'timestamp', found %s", describe(k))
					}
					col.meta, col.metaOff = k.text, k.off
				}
				c.accept("virtual")
				if err := nullable(); err != nil {
					return nil, err
				}
			}
			if tb.col(ct.text) != nil && tb.col(ct.text).name == ct.text {
				return nil, errAt(ct, "column %s declared twice", ct.text)
			}
			tb.cols = append(tb.cols, col)
		}
		if c.acceptP(",") {
			continue
		}
		if err := c.expectP(")"); err != nil {
			return nil, err
		}
		break
	}
	if tb.hasWM {
		col := tb.col(tb.wmCol)
		if col == nil {
			return nil, &lexError{tb.off, fmt.Sprintf("WATERMARK FOR %s: no such column in %s", tb.wmCol, tb.name)}
		}
		if col.typ != spec.TypeTimestamp {
			return nil, &lexError{col.off, fmt.Sprintf("WATERMARK FOR %s: the column is %s, want TIMESTAMP(3) or TIMESTAMP_LTZ(3)", col.name, col.flink)}
		}
		tb.wmCol = col.name
	}
	if c.accept("partitioned") {
		if err := c.expect("by"); err != nil {
			return nil, err
		}
		if err := c.expectP("("); err != nil {
			return nil, err
		}
		for {
			pt, err := c.ident("a partition column")
			if err != nil {
				return nil, err
			}
			tb.partition = append(tb.partition, pt.text)
			if !c.acceptP(",") {
				break
			}
		}
		if err := c.expectP(")"); err != nil {
			return nil, err
		}
	}
	if err := c.expect("with"); err != nil {
		return nil, err
	}
	if err := c.expectP("("); err != nil {
		return nil, err
	}
	for {
		k := c.next()
		if k.kind != tString {
			return nil, errAt(k, "WITH: want 'key' = 'value', found %s", describe(k))
		}
		if err := c.expectP("="); err != nil {
			return nil, err
		}
		v := c.next()
		if v.kind != tString {
			return nil, errAt(v, "WITH '%s': want a quoted value, found %s", k.text, describe(v))
		}
		key := strings.ToLower(k.text)
		if _, dup := tb.opts[key]; dup {
			return nil, errAt(k, "WITH: option '%s' given twice", k.text)
		}
		tb.opts[key] = option{val: v.text, off: v.off}
		tb.optOrder = append(tb.optOrder, key)
		if c.acceptP(",") {
			continue
		}
		if err := c.expectP(")"); err != nil {
			return nil, err
		}
		break
	}
	if t := c.peek(); t.kind != tEOF {
		return nil, errAt(t, "unexpected %s after CREATE TABLE", describe(t))
	}
	return tb, nil
}
