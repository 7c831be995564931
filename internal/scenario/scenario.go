// Package scenario runs scenario files, in the style of raft's datadriven
// tests: a file is a list of blocks, each a command line, its input lines,
// a "----" line and the expected output, blocks separated by a blank line;
// lines starting with "#" before a block are its notes. A test runs every
// block through its own function and compares the output; with -rewrite
// it writes the actual outputs back into the file instead, so a change of
// behaviour shows as a diff of the scenario files in review.
//
// Every scenario test of the module uses this one harness and its one
// -rewrite flag: `go test ./engine -run Scenarios -rewrite`.
package scenario

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Rewrite is the -rewrite flag.
var Rewrite = flag.Bool("rewrite", false, "rewrite the expected output of scenario files in testdata/")

// Block is one command of a scenario file.
type Block struct {
	Notes  []string // comment lines before the block
	Cmd    string   // the command line
	Input  []string // lines between the command and "----"
	Output []string // the expected output
	Line   int      // the command's line number, for messages
}

// Fields returns the command's name and its key=value arguments (a bare
// word is a key with an empty value).
func (b *Block) Fields() (string, map[string]string) {
	f := strings.Fields(b.Cmd)
	if len(f) == 0 {
		return "", nil
	}
	a := map[string]string{}
	for _, x := range f[1:] {
		k, v, _ := strings.Cut(x, "=")
		a[k] = v
	}
	return f[0], a
}

// Parse reads the blocks of a scenario file.
func Parse(path string) ([]Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var blocks []Block
	var cur *Block
	var notes []string
	inOutput := false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "#"):
			notes = append(notes, line)
		case cur == nil && strings.TrimSpace(line) == "":
		case cur == nil:
			blocks = append(blocks, Block{Notes: notes, Cmd: line, Line: n})
			notes = nil
			cur, inOutput = &blocks[len(blocks)-1], false
		case line == "----":
			inOutput = true
		case strings.TrimSpace(line) == "" && inOutput:
			cur = nil
		case inOutput:
			cur.Output = append(cur.Output, line)
		default:
			cur.Input = append(cur.Input, line)
		}
	}
	return blocks, sc.Err()
}

// Run runs every block of the file at path through exec, in order, and
// compares (or with -rewrite, rewrites) the expected outputs. An output
// line must not be empty (a blank line ends the block): exec writes "ok"
// or a placeholder instead.
func Run(t *testing.T, path string, exec func(t *testing.T, b *Block) []string) {
	t.Helper()
	blocks, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s: no blocks", path)
	}
	var out strings.Builder
	failed := false
	for i := range blocks {
		b := &blocks[i]
		got := exec(t, b)
		if strings.Join(got, "\n") != strings.Join(b.Output, "\n") && !*Rewrite {
			t.Errorf("%s:%d: %s:\ngot:\n%s\nwant:\n%s", filepath.Base(path), b.Line, b.Cmd, strings.Join(got, "\n"), strings.Join(b.Output, "\n"))
			failed = true
		}
		for _, l := range b.Notes {
			out.WriteString(l + "\n")
		}
		out.WriteString(b.Cmd + "\n")
		for _, l := range b.Input {
			out.WriteString(l + "\n")
		}
		out.WriteString("----\n")
		for _, l := range got {
			out.WriteString(l + "\n")
		}
		out.WriteString("\n")
	}
	if *Rewrite && !failed && !t.Failed() {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Files returns the scenario files matching pattern, failing the test when
// there are none (a scenario test that runs nothing is a defect).
func Files(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files %s: %v", pattern, err)
	}
	return files
}
