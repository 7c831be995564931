// Package aggsyntax is the one definition of the aggregate grammar of a
// pipeline spec, "func(column)" or "count()", and of its error messages.
// spec.ParseAggregate (positions in the spec file) and
// operators.ParseAggregate (the operator's own spec) both use it, so a spec
// that loads is one the window operator accepts and both report the same
// words. It knows nothing of schemas: whether the column exists and has a
// type the function takes is checked by the window operator.
package aggsyntax

import (
	"fmt"
	"strings"

	"github.com/floe-dev/floe/internal/suggest"
)

// funcs lists the aggregate functions in documentation order.
var funcs = []string{"count", "sum", "min", "max", "avg", "count_distinct", "first", "last"}

// Funcs returns the aggregate function names in documentation order.
func Funcs() []string { return append([]string(nil), funcs...) }

// Parse parses an aggregate expression: optional spaces, a function name
// (case-insensitive), "(", an optional column name, ")". count(*) means
// count(). It returns the lowercase function name and the column ("" for
// count()). Errors are those of Check, or a syntax error quoting text.
func Parse(text string) (fn, column string, err error) {
	t := strings.TrimSpace(text)
	open := strings.IndexByte(t, '(')
	if open <= 0 || !strings.HasSuffix(t, ")") {
		return "", "", fmt.Errorf("invalid aggregate %q (want func(column), e.g. sum(bytes) or count())", text)
	}
	fn = strings.ToLower(strings.TrimSpace(t[:open]))
	column = strings.TrimSpace(t[open+1 : len(t)-1])
	if err := Check(fn, column); err != nil {
		return fn, column, err
	}
	if column == "*" {
		column = ""
	}
	return fn, column, nil
}

// Check checks a parsed aggregate: fn is one of Funcs (exactly, lowercase),
// column is one column name (no "(", ")" or ","), and only count may have
// no column ("" or "*").
func Check(fn, column string) error {
	known := false
	for _, f := range funcs {
		known = known || f == fn
	}
	if !known {
		if s := suggest.Closest(fn, funcs); s != "" {
			return fmt.Errorf("unknown function %q (did you mean %s?)", fn, s)
		}
		return fmt.Errorf("unknown function %q (allowed: %s)", fn, strings.Join(funcs, ", "))
	}
	if strings.ContainsAny(column, "(),") {
		return fmt.Errorf("%s takes one column name, got %q", fn, column)
	}
	if (column == "" || column == "*") && fn != "count" {
		return fmt.Errorf("%s needs a column, e.g. %s(bytes)", fn, fn)
	}
	return nil
}
