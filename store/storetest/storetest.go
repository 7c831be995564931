// Package storetest is the conformance suite every store.Store implementation
// must pass (compare gocloud's blob/drivertest and Go's testing/fstest).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/store"
)

// Racers is the number of goroutines in the race tests.
const Racers = 8

// Run runs the conformance suite. open must return a new, empty Store for
// each call; Run closes it at the end of the subtest.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutGet", testPutGet},
		{"OverwriteChangesETag", testOverwrite},
		{"IfNotExist", testIfNotExist},
		{"IfMatch", testIfMatch},
		{"BothConditionsRejected", testBothConditions},
		{"InvalidKeys", testInvalidKeys},
		{"List", testList},
		{"ListSizeModTime", testListSizeModTime},
		{"ListAfter", testListAfter},
		{"SpecialKeys", testSpecialKeys},
		{"Delete", testDelete},
		{"LargeObject", testLargeObject},
		{"ReadRange", testReadRange},
		{"RaceIfNotExist", testRaceIfNotExist},
		{"RaceIfMatch", testRaceIfMatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s store.Store, key string, data []byte) string {
	t.Helper()
	etag, err := s.Put(ctxFor(t), key, data, store.PutOptions{})
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if etag == "" {
		t.Fatalf("Put(%q) returned an empty ETag", key)
	}
	return etag
}

// mustGet reads key and checks its content and, if etag != "", its ETag.
func mustGet(t *testing.T, s store.Store, key string, want []byte, etag string) string {
	t.Helper()
	got, gotTag, err := s.Get(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %q, want %q", key, clip(got), clip(want))
	}
	if gotTag == "" {
		t.Fatalf("Get(%q) returned an empty ETag", key)
	}
	if etag != "" && gotTag != etag {
		t.Fatalf("Get(%q) ETag = %q, want %q (the one Put returned)", key, gotTag, etag)
	}
	return gotTag
}

func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + fmt.Sprintf("...(%d bytes)", len(b))
	}
	return string(b)
}

func wantErr(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: error = %v, want %v", what, err, sentinel)
	}
}

func keys(infos []store.ObjectInfo) []string {
	out := make([]string, len(infos))
	for i, o := range infos {
		out[i] = o.Key
	}
	return out
}

func testGetMissing(t *testing.T, s store.Store) {
	_, _, err := s.Get(ctxFor(t), "no/such/key")
	wantErr(t, "Get missing", err, store.ErrNotFound)
	mustPut(t, s, "dir/obj", []byte("x"))
	_, _, err = s.Get(ctxFor(t), "dir")
	wantErr(t, "Get of a prefix", err, store.ErrNotFound)
	_, _, err = s.Get(ctxFor(t), "dir/obj/below")
	wantErr(t, "Get below an object", err, store.ErrNotFound)
}

func testPutGet(t *testing.T, s store.Store) {
	etag := mustPut(t, s, "a/b/c.json", []byte(`{"x":1}`))
	mustGet(t, s, "a/b/c.json", []byte(`{"x":1}`), etag)
	empty := mustPut(t, s, "empty", nil)
	mustGet(t, s, "empty", []byte{}, empty)
	if empty == etag {
		t.Fatalf("different contents share ETag %q", etag)
	}
}

func testOverwrite(t *testing.T, s store.Store) {
	e1 := mustPut(t, s, "k", []byte("one"))
	e2 := mustPut(t, s, "k", []byte("two"))
	if e1 == e2 {
		t.Fatalf("ETag did not change on overwrite: %q", e1)
	}
	mustGet(t, s, "k", []byte("two"), e2)
}

func testIfNotExist(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	etag, err := s.Put(ctx, "m/_manifest.json", []byte("first"), store.PutOptions{IfNotExist: true})
	if err != nil {
		t.Fatalf("IfNotExist on absent key: %v", err)
	}
	mustGet(t, s, "m/_manifest.json", []byte("first"), etag)
	_, err = s.Put(ctx, "m/_manifest.json", []byte("second"), store.PutOptions{IfNotExist: true})
	wantErr(t, "IfNotExist on existing key", err, store.ErrPrecondition)
	if errors.Is(err, store.ErrTransient) {
		t.Fatalf("IfNotExist loss also matches ErrTransient: %v", err)
	}
	mustGet(t, s, "m/_manifest.json", []byte("first"), etag)
	// After a delete the key can be created again.
	if err := s.Delete(ctx, "m/_manifest.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "m/_manifest.json", []byte("third"), store.PutOptions{IfNotExist: true}); err != nil {
		t.Fatalf("IfNotExist after delete: %v", err)
	}
	mustGet(t, s, "m/_manifest.json", []byte("third"), "")
}

func testIfMatch(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	e1 := mustPut(t, s, "_latest.json", []byte("v1"))
	e2, err := s.Put(ctx, "_latest.json", []byte("v2"), store.PutOptions{IfMatch: e1})
	if err != nil {
		t.Fatalf("IfMatch with current ETag: %v", err)
	}
	if e2 == e1 {
		t.Fatalf("ETag unchanged after IfMatch write: %q", e2)
	}
	mustGet(t, s, "_latest.json", []byte("v2"), e2)

	_, err = s.Put(ctx, "_latest.json", []byte("v3"), store.PutOptions{IfMatch: e1})
	wantErr(t, "IfMatch with stale ETag", err, store.ErrPrecondition)
	mustGet(t, s, "_latest.json", []byte("v2"), e2)

	_, err = s.Put(ctx, "_latest.json", []byte("v3"), store.PutOptions{IfMatch: `"not-an-etag"`})
	wantErr(t, "IfMatch with bogus ETag", err, store.ErrPrecondition)
	mustGet(t, s, "_latest.json", []byte("v2"), e2)

	_, err = s.Put(ctx, "absent.json", []byte("x"), store.PutOptions{IfMatch: e2})
	wantErr(t, "IfMatch on absent key", err, store.ErrPrecondition)
	_, _, err = s.Get(ctx, "absent.json")
	wantErr(t, "Get after failed IfMatch", err, store.ErrNotFound)

	// A chain of compare-and-swaps, each from the ETag the last one returned.
	cur := e2
	for i := range 3 {
		next, err := s.Put(ctx, "_latest.json", []byte(fmt.Sprintf("chain-%d", i)), store.PutOptions{IfMatch: cur})
		if err != nil {
			t.Fatalf("CAS %d: %v", i, err)
		}
		cur = next
	}
	mustGet(t, s, "_latest.json", []byte("chain-2"), cur)
}

func testBothConditions(t *testing.T, s store.Store) {
	_, err := s.Put(ctxFor(t), "both", []byte("x"), store.PutOptions{IfNotExist: true, IfMatch: "x"})
	if err == nil {
		t.Fatal("Put with IfNotExist and IfMatch succeeded")
	}
	_, _, err = s.Get(ctxFor(t), "both")
	wantErr(t, "Get after rejected Put", err, store.ErrNotFound)
}

func testInvalidKeys(t *testing.T, s store.Store) {
	for _, k := range []string{"", "/abs", "trailing/", "a//b", "a/../b", "./a", "a/.", ".floe-tmp/x", "a/.floe-locks"} {
		if _, err := s.Put(ctxFor(t), k, []byte("x"), store.PutOptions{}); err == nil {
			t.Errorf("Put(%q) accepted an invalid key", k)
		}
		if _, _, err := s.Get(ctxFor(t), k); err == nil || errors.Is(err, store.ErrTransient) {
			t.Errorf("Get(%q) = %v, want a non-transient error", k, err)
		}
	}
	infos, err := s.List(ctxFor(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 0 {
		t.Fatalf("invalid keys left objects: %v", keys(infos))
	}
}

func testList(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	// No key is also a "directory" of another key ("b" and "b/c"): file://
	// cannot store that, and floe's layout never needs it.
	all := []string{"a-b", "a/1", "a/2/x", "a/2/y", "ab", "b.txt", "b/c/d/e"}
	for _, k := range []string{"b/c/d/e", "ab", "a/2/y", "a/1", "b.txt", "a-b", "a/2/x"} {
		mustPut(t, s, k, []byte(k))
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a/", []string{"a/1", "a/2/x", "a/2/y"}},
		{"a", []string{"a-b", "a/1", "a/2/x", "a/2/y", "ab"}},
		{"ab", []string{"ab"}},
		{"a/2", []string{"a/2/x", "a/2/y"}},
		{"a/2/", []string{"a/2/x", "a/2/y"}},
		{"a/2/x", []string{"a/2/x"}},
		{"b", []string{"b.txt", "b/c/d/e"}},
		{"b/", []string{"b/c/d/e"}},
		{"c", nil},
		{"zz/", nil},
	} {
		infos, err := s.List(ctx, tc.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", tc.prefix, err)
		}
		if got := keys(infos); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// testListAfter: ListAfter is List restricted to the keys after the start
// key, in byte order: across directory levels ("a/2" sorts after "a-b" and
// before "ab"; "/" is 0x2f), for start keys that are not keys themselves,
// and with a prefix.
func testListAfter(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	all := []string{"a-b", "a/1", "a/2/x", "a/2/y", "a/3", "ab", "b.txt", "b/c/d/e", "day=2026-12-01/p1", "day=2026-12-02/p0"}
	for _, k := range all {
		mustPut(t, s, k, []byte(k))
	}
	after := func(k string) []string {
		var out []string
		for _, x := range all {
			if x > k {
				out = append(out, x)
			}
		}
		return out
	}
	for _, start := range []string{"", "a", "a-b", "a/", "a/1", "a/2", "a/2/x", "a/2/y", "a/20", "a/3", "a0", "b", "b.txt", "b/c", "day=2026-12-01/", "day=2026-12-01/p1", "day=2026-12-01/z", "zz"} {
		got, err := store.ListAfter(ctx, s, "", start)
		if err != nil {
			t.Fatalf("ListAfter(%q): %v", start, err)
		}
		if want := after(start); !slices.Equal(keys(got), want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("ListAfter(\"\", %q) = %q, want %q", start, keys(got), want)
		}
	}
	got, err := store.ListAfter(ctx, s, "a/", "a/2/x")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/2/y", "a/3"}; !slices.Equal(keys(got), want) {
		t.Errorf("ListAfter(\"a/\", \"a/2/x\") = %q, want %q", keys(got), want)
	}
}

func testListSizeModTime(t *testing.T, s store.Store) {
	before := time.Now()
	mustPut(t, s, "sized/ten", []byte("0123456789"))
	mustPut(t, s, "sized/zero", nil)
	infos, err := s.List(ctxFor(t), "sized/")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("List = %v, want 2 objects", keys(infos))
	}
	if infos[0].Key != "sized/ten" || infos[0].Size != 10 || infos[1].Size != 0 {
		t.Fatalf("List = %+v, want sized/ten (10 bytes) and sized/zero (0 bytes)", infos)
	}
	for _, o := range infos {
		// Generous bounds: a server's clock may differ a little from ours,
		// and S3 ModTimes have second resolution.
		if o.ModTime.Before(before.Add(-time.Hour)) || o.ModTime.After(time.Now().Add(time.Hour)) {
			t.Errorf("%s ModTime %v is not near now (%v)", o.Key, o.ModTime, before)
		}
	}
}

func testSpecialKeys(t *testing.T, s store.Store) {
	ks := []string{
		"gen=3/epoch=41/_manifest.json",
		"with space/and more spaces.parquet",
		"part=a=b/x+y/~tilde/100%/ünïcode",
		"a#b/c?d/e&f",
	}
	etags := map[string]string{}
	for _, k := range ks {
		etags[k] = mustPut(t, s, k, []byte("data of "+k))
	}
	for _, k := range ks {
		mustGet(t, s, k, []byte("data of "+k), etags[k])
	}
	infos, err := s.List(ctxFor(t), "")
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ks)
	slices.Sort(want)
	if got := keys(infos); !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	infos, err = s.List(ctxFor(t), "gen=3/")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(infos); !slices.Equal(got, []string{"gen=3/epoch=41/_manifest.json"}) {
		t.Fatalf("List(gen=3/) = %q", got)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	mustPut(t, s, "d/x/1", []byte("1"))
	mustPut(t, s, "d/x/2", []byte("2"))
	if err := s.Delete(ctx, "d/x/1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, _, err := s.Get(ctx, "d/x/1")
	wantErr(t, "Get after Delete", err, store.ErrNotFound)
	if err := s.Delete(ctx, "d/x/1"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if err := s.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("Delete of absent key: %v", err)
	}
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatalf("Delete of a prefix that is no object: %v", err)
	}
	infos, err := s.List(ctx, "d/")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(infos); !slices.Equal(got, []string{"d/x/2"}) {
		t.Fatalf("List after Delete = %q, want [d/x/2]", got)
	}
	if err := s.Delete(ctx, "d/x/2"); err != nil {
		t.Fatal(err)
	}
	// The now empty prefix can hold objects again.
	mustPut(t, s, "d/x/3", []byte("3"))
	mustGet(t, s, "d/x/3", []byte("3"), "")
}

func testLargeObject(t *testing.T, s store.Store) {
	// 17 MiB: above the S3 transfer manager's multipart threshold (16 MiB).
	data := make([]byte, 17<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	ctx := ctxFor(t)
	etag, err := s.Put(ctx, "big/state.parquet", data, store.PutOptions{IfNotExist: true})
	if err != nil {
		t.Fatalf("Put large IfNotExist: %v", err)
	}
	mustGet(t, s, "big/state.parquet", data, etag)
	// A large losing create: on S3 the condition travels on
	// CompleteMultipartUpload.
	other := slices.Clone(data)
	other[0]++
	_, err = s.Put(ctx, "big/state.parquet", other, store.PutOptions{IfNotExist: true})
	wantErr(t, "large IfNotExist on existing key", err, store.ErrPrecondition)
	mustGet(t, s, "big/state.parquet", data, etag)
	// A large compare-and-swap.
	etag2, err := s.Put(ctx, "big/state.parquet", other, store.PutOptions{IfMatch: etag})
	if err != nil {
		t.Fatalf("large IfMatch: %v", err)
	}
	if etag2 == etag {
		t.Fatalf("large IfMatch did not change the ETag %q", etag)
	}
	mustGet(t, s, "big/state.parquet", other, etag2)
}

func testReadRange(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	data := []byte("0123456789abcdefghij")
	mustPut(t, s, "x/obj", data)
	mustPut(t, s, "x/empty", []byte{})
	for _, tc := range []struct {
		key            string
		offset, length int64
		want           string
	}{
		{"x/obj", 0, 4, "0123"},
		{"x/obj", 10, 5, "abcde"},
		{"x/obj", 15, 100, "fghij"}, // clipped at the end
		{"x/obj", 19, 1, "j"},
		{"x/obj", 20, 5, ""}, // at the end
		{"x/obj", 25, 5, ""}, // past it
		{"x/obj", 0, 20, string(data)},
		{"x/empty", 0, 8, ""},
	} {
		got, err := store.ReadRange(ctx, s, tc.key, tc.offset, tc.length)
		if err != nil {
			t.Fatalf("ReadRange(%s, %d, %d): %v", tc.key, tc.offset, tc.length, err)
		}
		if string(got) != tc.want {
			t.Errorf("ReadRange(%s, %d, %d) = %q, want %q", tc.key, tc.offset, tc.length, got, tc.want)
		}
	}
	_, err := store.ReadRange(ctx, s, "x/missing", 0, 4)
	wantErr(t, "ReadRange of a missing key", err, store.ErrNotFound)
	for _, r := range [][2]int64{{-1, 4}, {0, 0}, {0, -1}} {
		if _, err := store.ReadRange(ctx, s, "x/obj", r[0], r[1]); err == nil {
			t.Errorf("ReadRange(offset %d, length %d) accepted", r[0], r[1])
		}
	}
}

// raceResult runs fn in Racers goroutines released together and returns their
// errors. Each racer retries ErrTransient (S3 answers concurrent conditional
// writes with 409 ConditionalRequestConflict) but nothing else.
func race(t *testing.T, fn func(ctx context.Context, i int) error) []error {
	ctx := ctxFor(t)
	errs := make([]error, Racers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range Racers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			for try := 0; ; try++ {
				errs[i] = fn(ctx, i)
				if !errors.Is(errs[i], store.ErrTransient) || try == 20 {
					return
				}
				time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
			}
		}()
	}
	start.Done()
	done.Wait()
	return errs
}

// oneWinner checks that exactly one racer succeeded and all others lost with
// ErrPrecondition, and returns the winner.
func oneWinner(t *testing.T, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("racers %d and %d both won", winner, i)
			}
			winner = i
		case errors.Is(err, store.ErrPrecondition):
		default:
			t.Fatalf("racer %d: %v, want success or ErrPrecondition", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer won: %v", errs)
	}
	return winner
}

// raceRounds is how many independent races each race test runs: one round
// rarely catches a broken lock, twenty usually do.
const raceRounds = 20

func testRaceIfNotExist(t *testing.T, s store.Store) {
	for r := range raceRounds {
		key := fmt.Sprintf("race/%02d/_manifest.json", r)
		etags := make([]string, Racers)
		errs := race(t, func(ctx context.Context, i int) error {
			var err error
			etags[i], err = s.Put(ctx, key, []byte(fmt.Sprintf("racer %d", i)), store.PutOptions{IfNotExist: true})
			return err
		})
		w := oneWinner(t, errs)
		mustGet(t, s, key, []byte(fmt.Sprintf("racer %d", w)), etags[w])
	}
}

func testRaceIfMatch(t *testing.T, s store.Store) {
	for r := range raceRounds {
		key := fmt.Sprintf("race/%02d/_latest.json", r)
		base := mustPut(t, s, key, []byte("base"))
		etags := make([]string, Racers)
		errs := race(t, func(ctx context.Context, i int) error {
			var err error
			etags[i], err = s.Put(ctx, key, []byte(fmt.Sprintf("racer %d", i)), store.PutOptions{IfMatch: base})
			return err
		})
		w := oneWinner(t, errs)
		mustGet(t, s, key, []byte(fmt.Sprintf("racer %d", w)), etags[w])
	}
}
