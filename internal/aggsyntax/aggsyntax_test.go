package aggsyntax

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		text, fn, col, err string
	}{
		{"count()", "count", "", ""},
		{"count(*)", "count", "", ""},
		{" COUNT ( ) ", "count", "", ""},
		{"sum(bytes)", "sum", "bytes", ""},
		{" count_distinct ( user_id ) ", "count_distinct", "user_id", ""},
		{"Last(x)", "last", "x", ""},
		{"sum bytes", "", "", `invalid aggregate "sum bytes" (want func(column), e.g. sum(bytes) or count())`},
		{"(bytes)", "", "", `invalid aggregate "(bytes)"`},
		{"sum(bytes", "", "", `invalid aggregate "sum(bytes"`},
		{"", "", "", `invalid aggregate ""`},
		{"summ(bytes)", "", "", `unknown function "summ" (did you mean sum?)`},
		{"count distinct(x)", "", "", `unknown function "count distinct"`},
		{"median(x)", "", "", `unknown function "median" (allowed: count, sum, min, max, avg, count_distinct, first, last)`},
		{"sum(a, b)", "", "", `sum takes one column name, got "a, b"`},
		{"sum(f(x))", "", "", `sum takes one column name, got "f(x)"`},
		{"count_distinct()", "", "", `count_distinct needs a column, e.g. count_distinct(bytes)`},
		{"sum(*)", "", "", `sum needs a column, e.g. sum(bytes)`},
	} {
		fn, col, err := Parse(tc.text)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error = %v, want it to contain %q", tc.text, err, tc.err)
			}
			continue
		}
		if err != nil || fn != tc.fn || col != tc.col {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", tc.text, fn, col, err, tc.fn, tc.col)
		}
	}
}

func TestFuncsIsACopy(t *testing.T) {
	f := Funcs()
	f[0] = "x"
	if Funcs()[0] != "count" {
		t.Error("Funcs exposes its backing array")
	}
}
