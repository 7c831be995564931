package spec

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// binary returns n pseudo-random bytes (fixed seed).
func binary(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(1)).Read(b)
	return b
}

// checkShortError checks that err is one ErrInvalid line naming the file,
// containing want, with no control characters and at most max bytes.
func checkShortError(t *testing.T, err error, file, want string, max int) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want an error containing %q", want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error is not ErrInvalid: %v", err)
	}
	msg := err.Error()
	if len(msg) > max {
		t.Errorf("error is %d bytes, want <= %d: %.300s...", len(msg), max, msg)
	}
	if strings.ContainsAny(msg, "\n\r\x00\x1b") {
		t.Errorf("error has control characters: %q", msg)
	}
	if !strings.HasPrefix(msg, file+":") || !strings.Contains(msg, want) {
		t.Errorf("error %q does not name %s and %q", msg, file, want)
	}
}

// heapAlloc returns the bytes allocated while f runs.
func heapAlloc(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestHostileSpecsRefusedBeforeParsing: inputs that used to cost the YAML
// library seconds and gigabytes (100,000 nested '[' took 33 s and 15 GB) or
// that echoed megabytes into the error are refused by the byte scan, with
// one short line naming the file and the limit, allocating next to nothing.
func TestHostileSpecsRefusedBeforeParsing(t *testing.T) {
	const deep = 100_000
	var indented strings.Builder
	for i := 0; i < 1400; i++ {
		indented.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"100k nested [", "nesting deeper than 64 levels", []byte("name: " + strings.Repeat("[", deep))},
		{"100k nested [ closed", "nesting deeper than 64 levels", []byte(strings.Repeat("[", deep) + strings.Repeat("]", deep))},
		{"100k nested {", "nesting deeper than 64 levels", []byte("a: " + strings.Repeat("{a: ", deep))},
		{"100k compact entries", "nesting deeper than 64 levels", []byte("a:\n" + strings.Repeat("- ", deep) + "x\n")},
		{"deep indentation", "nesting deeper than 64 levels", []byte(indented.String())},
		{"brackets hidden behind a plain quote", "nesting deeper than 64 levels", []byte("a: [x'y, " + strings.Repeat("[", deep))},
		{"brackets in a block scalar", "nesting deeper than 64 levels", []byte("a: |\n  " + strings.Repeat("[", deep) + "\n")},
		{"brackets in a comment", "nesting deeper than 64 levels", []byte("a: b # " + strings.Repeat("[", deep) + "\n")},
		{"3 MB binary", "larger than the limit of 1048576 bytes", binary(3 << 20)},
		{"3 MB text", "larger than the limit of 1048576 bytes", []byte("name: " + strings.Repeat("x", 3<<20))},
		{"binary under the size limit", "not a text file", binary(500 << 10)},
		{"NUL byte", "2:4: not a text file: NUL byte", []byte("name: x\nsou\x00rce: {}\n")},
		{"escape byte", `1:7: not a text file: control character '\x1b'`, []byte("name: \x1b[31mred\n")},
		{"invalid UTF-8", "1:8: not a text file: invalid UTF-8 byte 0xff", []byte("name: é\xff\n")},
		{"500k flow elements", "more than 10000 elements", []byte("a: [" + strings.Repeat("1,", 500_000) + "1]\n")},
		{"250k lines", "more than 10000 elements", []byte(strings.Repeat("- 1\n", 250_000))},
		{"200k aliases", "more than 10000 elements", []byte("a: &a x\nb: [" + strings.Repeat("*a,", 200_000) + "1]\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			alloc := heapAlloc(func() { _, err = Parse("hostile.yaml", tc.data, "/base") })
			checkShortError(t, err, "hostile.yaml", tc.want, 200)
			if alloc > 1<<20 {
				t.Errorf("refusing it allocated %d bytes, want < 1 MiB", alloc)
			}
		})
	}
}

// TestLoadReadsAtMostTheLimit: Load refuses a huge file without reading it
// all (a sparse 1 GiB file here) and names the file.
func TestLoadReadsAtMostTheLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var lerr error
	alloc := heapAlloc(func() { _, lerr = Load(path) })
	checkShortError(t, lerr, path, "larger than the limit", 300)
	if alloc > 8<<20 {
		t.Errorf("Load allocated %d bytes, want < 8 MiB", alloc)
	}
}

// quotedRun matches a Go-quoted string in a message.
var quotedRun = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// TestErrorsQuoteShortExcerpts: a long or control-laden value is quoted as
// a short excerpt, escaped, on one line, whichever check reports it.
func TestErrorsQuoteShortExcerpts(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	esc := `\e[31m\nred`
	cases := []struct{ name, spec, want string }{
		{"validate: name", strings.Replace(base, "name: clicks-per-user", "name: "+long, 1), `invalid name "xxxx`},
		{"validate: name with escapes", strings.Replace(base, "name: clicks-per-user", `name: "`+esc+`"`, 1), `invalid name "\x1b[31m\nred"`},
		{"decode: duration", strings.Replace(base, "tumbling: 1m", "tumbling: "+long, 1), `invalid duration "xxx`},
		{"decode: type of value", strings.Replace(base, "max_files_per_epoch: 8", "max_files_per_epoch: "+long, 1), `expected an integer, got "xxx`},
		{"decode: huge integer", strings.Replace(base, "max_files_per_epoch: 8", "max_files_per_epoch: 1"+strings.Repeat("0", 5000), 1), `got "1000`},
		{"decode: unknown key", strings.Replace(base, "name: clicks-per-user", "name: x\n"+long+": 1", 1), `unknown field`},
		{"decode: unknown key with escapes", strings.Replace(base, "name: clicks-per-user", "name: x\n\""+esc+"\": 1", 1), `\x1b[31m\nred: unknown field`},
		{"decode: aggregate", strings.Replace(base, `clicks: "count()"`, `clicks: "`+long+`"`, 1), `invalid aggregate "xxx`},
		{"decode: url", strings.Replace(base, "url: ../events", "url: ~/"+long, 1), `path "~/xxx`},
		{"validate: unknown type", strings.Replace(base, "page: string", "page: "+long, 1), `unknown type "xxx`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.spec, long) && !strings.Contains(tc.spec, esc) && !strings.Contains(tc.spec, "10000") {
				t.Fatal("replacement did not apply")
			}
			_, err := Parse("f.yaml", []byte(tc.spec), "/base")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if len(line) > 400 || strings.ContainsAny(line, "\r\x00\x1b") || !strings.HasPrefix(line, "f.yaml:") {
					t.Errorf("error line is %d bytes: %q", len(line), line)
				}
				for _, q := range quotedRun.FindAllString(line, -1) {
					if n := len([]rune(q)); n > 2+4*excerptRunes {
						t.Errorf("quotes %d characters: %.100s...", n, q)
					}
				}
			}
		})
	}
}

func TestExcerptAndOneLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", `"abc"`},
		{"a\nb\x00\xff", `"a\nb\x00\xff"`},
		{strings.Repeat("é", 61), `"` + strings.Repeat("é", 60) + `"... (122 bytes)`},
	} {
		if got := excerpt(tc.in); got != tc.want {
			t.Errorf("excerpt(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := oneLine("a\nb\tc\x1b\xff\uFFFD", 100); got != `a\nb\tc\x1b\xff`+"\uFFFD" {
		t.Errorf("oneLine = %q", got)
	}
	if got := oneLine(strings.Repeat("é", 300), 10); got != "ééééé..." {
		t.Errorf("oneLine cut = %q", got)
	}
	if got := message("bad %q and %s and %5.2f%%: %q", strings.Repeat("y", 100), strings.Repeat("z", 3), 1.5, SourceType("t\n")); got !=
		`bad "`+strings.Repeat("y", 60)+`"... (100 bytes) and zzz and  1.50%: "t\n"` {
		t.Errorf("message = %s", got)
	}
}

// TestScanAcceptsRealSpecs: every spec in this package's tests and the
// repository's sample pipelines passes the byte scan, far from its limits.
func TestScanAcceptsRealSpecs(t *testing.T) {
	specs := map[string][]byte{"designSketch": []byte(designSketch), "base": []byte(base)}
	files, _ := filepath.Glob("../testdata/pipelines/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		specs[f] = b
	}
	for name, b := range specs {
		st, err := scanYAML(b, 1<<30, 1<<30)
		if err != nil || st.depth > maxDepth/4 || st.elements > maxElements/10 {
			t.Errorf("%s: depth %d, elements %d, err %v", name, st.depth, st.elements, err)
		}
		if err := checkText(b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// astDepth is the collection nesting of a YAML AST: what the library's cost
// grows with.
func astDepth(n ast.Node) int {
	switch v := n.(type) {
	case *ast.DocumentNode:
		return astDepth(v.Body)
	case *ast.TagNode:
		return astDepth(v.Value)
	case *ast.AnchorNode:
		return astDepth(v.Value)
	case *ast.MappingKeyNode:
		return astDepth(v.Value)
	case *ast.MappingNode:
		d := 0
		for _, mv := range v.Values {
			d = max(d, astDepth(mv.Key), astDepth(mv.Value))
		}
		return d + 1
	case *ast.MappingValueNode:
		return 1 + max(astDepth(v.Key), astDepth(v.Value))
	case *ast.SequenceNode:
		d := 0
		for _, it := range v.Values {
			d = max(d, astDepth(it))
		}
		return d + 1
	}
	return 0
}

// FuzzScanDepth: the byte scan never estimates less nesting than the YAML
// library builds, so nothing deep gets past it to the library.
func FuzzScanDepth(f *testing.F) {
	for _, s := range []string{designSketch, base, "a: [x'y, [[1]]]\n", "- - - [a, {b: [c]}]\n", "a: |\n  [[[\nb: [[2]]\n",
		"a: 'x\n  [y'\nb: [[[c]]]\n", "? [a]\n: [[b]]\n", "a: &x [*x, !t [1]]\n", "{\"a\":[\"b\",{\"c\":[1]}]}\n",
		"a: \"x\\\"[\" \nb: [[[1]]]\n", "a:\n- [\n  [1]]\n", "--- [a]\n--- {b: [c]}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 4096 {
			return
		}
		st, _ := scanYAML([]byte(text), 1<<30, 1<<30)
		file, err := parser.ParseBytes([]byte(text), 0)
		if err != nil {
			return
		}
		for _, doc := range file.Docs {
			if d := astDepth(doc); d > st.depth {
				t.Fatalf("library nests %d deep, the scan estimates %d", d, st.depth)
			}
		}
	})
}
