package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3},
		{"sum", "summ", 1}, {"bytes", "byts", 1}, {"user_id", "usr_id", 1},
		{"ü", "u", 1}, {"naïve", "naive", 1}, {"flaw", "lawn", 2}, {"same", "same", 0},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	cands := []string{"count", "sum", "min", "max", "avg", "count_distinct", "first", "last"}
	for _, tc := range []struct{ s, want string }{
		{"summ", "sum"}, {"cnt", "count"}, {"count_distinc", "count_distinct"},
		{"sum", ""},      // exact: not a typo
		{"zzzzzzzz", ""}, // too far
		{string(make([]byte, 65)), ""},
	} {
		if got := Closest(tc.s, cands); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
