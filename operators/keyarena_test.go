package operators

import (
	"fmt"
	"testing"
)

// TestKeyTablePages: entries pushed across several pages (and after a
// reserve) are found by id, every page but the last holds exactly keyPage,
// and pointers into a full page survive later pushes (no copying).
func TestKeyTablePages(t *testing.T) {
	var kt keyTable
	kt.reserve(100)
	const n = 3*keyPage + 123
	var first *keyInfo
	for i := range n {
		if kid := kt.push(keyInfo{kg: int32(i)}); kid != int32(i) {
			t.Fatalf("push %d returned id %d", i, kid)
		}
		if i == keyPage {
			first = kt.at(0) // page 0 is full: it never moves again
		}
		if i == keyPage+5 {
			kt.reserve(keyPage)
		}
	}
	if kt.len() != n {
		t.Fatalf("len %d, want %d", kt.len(), n)
	}
	for i := range int32(n) {
		if got := kt.at(i).kg; got != i {
			t.Fatalf("entry %d holds %d", i, got)
		}
	}
	for p, page := range kt.pages[:len(kt.pages)-1] {
		if len(page) != keyPage {
			t.Fatalf("page %d holds %d entries, want %d", p, len(page), keyPage)
		}
	}
	if first != kt.at(0) {
		t.Fatal("the first page moved")
	}
}

// TestWindowManyKeys: a tumbling window over more keys than a key page
// holds emits every key's window, restores from its snapshot into a fresh
// instance and emits the same there.
func TestWindowManyKeys(t *testing.T) {
	const keys = 2*keyPage + 1000
	spec := WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "c", "count()", "sum", "sum(n)")}
	w := newWin(t, spec)
	var rows []ev
	for i := range keys {
		u := fmt.Sprintf("user-%06d-with-a-long-name", i) // not inline
		rows = append(rows, ev{ts: int64(i % 10), user: &u, n: ip(int64(i))})
	}
	rec := batch(t, rows...)
	if late, err := w.Process(rec); err != nil || late != nil {
		t.Fatal(late, err)
	}
	rec.Release()
	snap, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(snap...)
	r := newWin(t, spec)
	if err := r.Restore(snap, 0, 128, w.Watermark()); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Window{w, r} {
		out, err := x.Advance(100)
		if err != nil {
			t.Fatal(err)
		}
		got := rowsOf(out)
		release(out)
		if len(got) != keys {
			t.Fatalf("%d windows emitted, want %d", len(got), keys)
		}
		if want := fmt.Sprintf("%q 0 %d 1 %d", "user-000007-with-a-long-name", 10, 7); got[7] != want {
			t.Fatalf("row 7 %q, want %q", got[7], want)
		}
	}
}

// TestOutputKeysInlineBoundary: Advance writes short keys from its sort
// entries and others from the key arena; keys at the inline limit (16
// bytes), just past it, empty and null all come out as they went in, in
// the order of their encodings (null first, then strings by length and
// bytes).
func TestOutputKeysInlineBoundary(t *testing.T) {
	w := newWin(t, WindowSpec{Kind: Tumbling, Size: 10 * us, Aggregates: mustAggs(t, "c", "count()")})
	users := []string{"", "a", "0123456789abcdef", "0123456789abcdefg", "0123456789abcde", "\x00\x01"}
	var rows []ev
	for i, u := range users {
		u := u
		rows = append(rows, ev{ts: int64(i), user: &u, n: ip(1)})
	}
	rows = append(rows, ev{ts: 3, n: ip(1)}) // null key
	rec := batch(t, rows...)
	if _, err := w.Process(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	out, err := w.Advance(100)
	if err != nil {
		t.Fatal(err)
	}
	got := rowsOf(out)
	release(out)
	var want []string
	for _, u := range []string{"", "a", "\x00\x01", "0123456789abcde", "0123456789abcdef", "0123456789abcdefg"} {
		want = append(want, fmt.Sprintf("%q 0 10 1", u))
	}
	want = append([]string{"null 0 10 1"}, want...)
	eqLines(t, "output", got, want)
}
