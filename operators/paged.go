package operators

// pageBits sets the size of a paged table's pages: 4096 elements.
const pageBits = 12

const pageLen = 1 << pageBits

// paged is a growable table of T indexed by int32, kept in fixed pages of
// pageLen elements, for the per-key tables of the join, dedup and top_n
// (a million keys of about 100 bytes each). Appending never moves what is
// there: a Go slice grows by a quarter for large sizes, so a table grown
// to n elements has been copied about four times over, each copy of a type
// with pointers under write barriers, in one memmove that the garbage
// collector cannot preempt (q18's key table: 1.1 s of 10 CPU s). Only the
// first page grows like a slice, so a small table stays small.
type paged[T any] struct {
	pages [][]T
	n     int
}

// len is the number of elements.
func (p *paged[T]) len() int { return p.n }

// at returns element i (0 <= i < len). The pointer is valid until the next
// push or reserve, as with a slice (only the first page ever moves).
func (p *paged[T]) at(i int32) *T {
	return &p.pages[i>>pageBits][i&(pageLen-1)]
}

// push appends v and returns its index.
func (p *paged[T]) push(v T) int32 {
	i := p.n
	pg := i >> pageBits
	if pg == len(p.pages) {
		c := 0
		if pg > 0 {
			c = pageLen
		}
		p.pages = append(p.pages, make([]T, 0, c))
	}
	p.pages[pg] = append(p.pages[pg], v)
	p.n++
	return int32(i)
}

// reserve makes room for n more elements without growing the first page
// step by step.
func (p *paged[T]) reserve(n int) {
	want := p.n + n
	if want <= 0 {
		return
	}
	if len(p.pages) == 0 {
		p.pages = append(p.pages, make([]T, 0, min(want, pageLen)))
	} else if first := p.pages[0]; len(p.pages) == 1 && cap(first) < min(want, pageLen) {
		grown := make([]T, len(first), min(want, pageLen))
		copy(grown, first)
		p.pages[0] = grown
	}
	for len(p.pages)<<pageBits < want {
		p.pages = append(p.pages, make([]T, 0, pageLen))
	}
}

// reset empties the table and drops its pages.
func (p *paged[T]) reset() { *p = paged[T]{} }
