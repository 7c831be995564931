package operators

import "testing"

// TestPaged pushes across page boundaries, with and without reserve, and
// checks every element, that pointers taken earlier still see later writes
// (no page after the first moves), and that a small table keeps a small first page.
func TestPaged(t *testing.T) {
	for _, reserve := range []int{0, 10, pageLen - 1, 3*pageLen + 5} {
		var p paged[[2]int64]
		p.reserve(reserve)
		const n = 3*pageLen + 17
		var early *[2]int64
		for i := range n {
			if got := p.push([2]int64{int64(i), -int64(i)}); got != int32(i) {
				t.Fatalf("reserve %d: push %d returned %d", reserve, i, got)
			}
			if i == pageLen+5 {
				early = p.at(pageLen + 5)
			}
		}
		if p.len() != n {
			t.Fatalf("reserve %d: len %d, want %d", reserve, p.len(), n)
		}
		for i := range int32(n) {
			if v := *p.at(i); v != [2]int64{int64(i), -int64(i)} {
				t.Fatalf("reserve %d: element %d = %v", reserve, i, v)
			}
		}
		p.at(pageLen + 5)[1] = 99
		if early[1] != 99 {
			t.Fatalf("reserve %d: a pointer into the second page moved when the table grew", reserve)
		}
		for i, pg := range p.pages {
			if len(pg) > pageLen || (i < len(p.pages)-1 && len(pg) != pageLen) {
				t.Fatalf("reserve %d: page %d has %d elements", reserve, i, len(pg))
			}
		}
		p.reset()
		if p.len() != 0 || len(p.pages) != 0 {
			t.Fatalf("reserve %d: reset left %d elements", reserve, p.len())
		}
	}
	var small paged[int64]
	for i := range 3 {
		small.push(int64(i))
	}
	if c := cap(small.pages[0]); c >= pageLen {
		t.Fatalf("a table of 3 elements has a first page of %d", c)
	}
}
