package flinksql

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// pushdownSQL is a regular join (state TTL 1 h) with one condition on each
// side's columns and one on both.
const pushdownSQL = `SET 'pipeline.name' = 'pushdown';
SET 'state.parallelism' = '2';
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '%[1]s', 'format' = 'json', 'source.max-files-per-epoch' = '2');
CREATE TABLE auctions (id BIGINT, seller BIGINT, category BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '%[2]s', 'format' = 'json', 'source.max-files-per-epoch' = '2');
CREATE TABLE out (auction BIGINT, bidder BIGINT, price BIGINT, seller BIGINT, category BIGINT)
WITH ('connector' = 'filesystem', 'path' = '%[3]s', 'format' = 'parquet');
SET 'state.url' = '%[4]s';
INSERT INTO out
SELECT B.auction, B.bidder, B.price, A.seller, A.category
FROM bids B JOIN auctions A ON B.auction = A.id
WHERE A.category <> 3 AND B.price > 150 AND B.price > A.seller * 20;
`

// TestJoinConditionPushdown: an inner join's condition on one side's columns
// filters that side before the join, and the filter after the join keeps
// every condition. The lowering says so; the rows equal the join computed
// here from the files; and state written by the lowering without the
// filters before the join (holding an auction of category 3 that later bids
// pair with) restored under the new one gives the same rows, not pairs of
// that auction.
func TestJoinConditionPushdown(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	data := filepath.Join(root, "auctions")
	if err := os.CopyFS(data, os.DirFS("../testdata/auctions")); err != nil {
		t.Fatal(err)
	}
	bids, auctions := filepath.Join(data, "bids"), filepath.Join(data, "auctions")
	parse := func(where string, push bool) (*spec.Pipeline, string) {
		t.Helper()
		defer func(old bool) { pushJoinConditions = old }(pushJoinConditions)
		pushJoinConditions = push
		dir := filepath.Join(root, where)
		sink := filepath.Join(dir, "out")
		src := []byte(fmt.Sprintf(pushdownSQL, bids, auctions, sink, filepath.Join(dir, "state")))
		p, err := Parse("pushdown.sql", src, root)
		if err != nil {
			t.Fatal(err)
		}
		return p, sink
	}
	rowsOf := func(sink string, outputs []string) []string {
		t.Helper()
		var rows []string
		for _, o := range outputs {
			for _, r := range readRows(t, filepath.Join(sink, filepath.FromSlash(o))) {
				// the event time the sink carries along is not compared
				rows = append(rows, tsField.ReplaceAllString(r, ""))
			}
		}
		slices.Sort(rows)
		return rows
	}

	// The lowering.
	y, _, err := Translate("pushdown.sql", []byte(fmt.Sprintf(pushdownSQL, bids, auctions, "/tmp/o", "/tmp/s")))
	if err != nil {
		t.Fatal(err)
	}
	var lowered struct {
		Stages []struct {
			Name   string   `yaml:"name"`
			Input  string   `yaml:"input"`
			Inputs []string `yaml:"inputs"`
			Filter string   `yaml:"filter"`
			Join   any      `yaml:"join"`
		} `yaml:"stages"`
	}
	if err := yaml.Unmarshal(y, &lowered); err != nil {
		t.Fatal(err)
	}
	filters := map[string]string{} // filter stage -> its input
	var join string
	var joinInputs []string
	for _, s := range lowered.Stages {
		if s.Filter != "" {
			filters[s.Name] = s.Input
		}
		if s.Join != nil {
			join, joinInputs = s.Name, s.Inputs
		}
	}
	var after string
	for _, s := range lowered.Stages {
		if s.Filter != "" && s.Input == join {
			after = s.Filter
		}
	}
	if len(joinInputs) != 2 || filters[joinInputs[0]] != "bids" || filters[joinInputs[1]] != "auctions" {
		t.Errorf("the join's inputs are %v, want a filter over bids and one over auctions:\n%s", joinInputs, y)
	}
	for _, s := range lowered.Stages {
		if s.Name == joinInputs[0] && s.Filter != "price > 150" || s.Name == joinInputs[1] && s.Filter != "category != 3" {
			t.Errorf("stage %s filters %q:\n%s", s.Name, s.Filter, y)
		}
	}
	for _, c := range []string{"category != 3", "price > 150", "price > (seller * 20)"} {
		if !strings.Contains(after, c) {
			t.Errorf("the filter after the join is %q, lacks %q:\n%s", after, c, y)
		}
	}

	// The rows, against the join computed here.
	type auction struct{ ID, Seller, Category int64 }
	type bid struct{ Auction, Bidder, Price int64 }
	var as []auction
	var bs []bid
	readJSONL(t, auctions, func(line []byte) {
		var a auction
		if err := json.Unmarshal(line, &a); err != nil {
			t.Fatal(err)
		}
		as = append(as, a)
	})
	readJSONL(t, bids, func(line []byte) {
		var b bid
		if err := json.Unmarshal(line, &b); err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	})
	var want []string
	dropped := 0 // pairs the conditions drop
	for _, b := range bs {
		for _, a := range as {
			if b.Auction != a.ID {
				continue
			}
			if a.Category != 3 && b.Price > 150 && b.Price > a.Seller*20 {
				want = append(want, fmt.Sprintf("auction=%d bidder=%d price=%d seller=%d category=%d ", b.Auction, b.Bidder, b.Price, a.Seller, a.Category))
			} else {
				dropped++
			}
		}
	}
	slices.Sort(want)
	if len(want) == 0 || dropped == 0 {
		t.Fatalf("the sample data gives %d pairs and drops %d: the test needs both", len(want), dropped)
	}
	p, sink := parse("new", true)
	res, err := engine.Run(ctx, p, engine.Options{Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(sink, res.Outputs); !slices.Equal(got, want) {
		t.Errorf("pushed down: %d rows, want %d; first difference: %s", len(got), len(want), firstDiff(got, want))
	}

	// State of the old lowering, continued by the new one.
	old, sink := parse("upgrade", false)
	r1, err := engine.Run(ctx, old, engine.Options{UntilEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Epochs != 1 {
		t.Fatalf("the old lowering ran %d epochs, want 1", r1.Epochs)
	}
	cont, _ := parse("upgrade", true)
	if _, err := engine.Run(ctx, cont, engine.Options{Drain: true}); err != nil {
		t.Fatal(err)
	}
	all, err := engine.Outputs(ctx, cont)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(sink, all); !slices.Equal(got, want) {
		t.Errorf("old state, new lowering: %d rows, want %d; first difference: %s", len(got), len(want), firstDiff(got, want))
	}
}

var tsField = regexp.MustCompile(`ts=\S* `)

// firstDiff describes where two sorted row lists first differ.
func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("row %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if len(got) > len(want) {
		return fmt.Sprintf("extra row %q", got[len(want)])
	}
	if len(want) > len(got) {
		return fmt.Sprintf("missing row %q", want[len(got)])
	}
	return "none"
}

func readJSONL(t *testing.T, dir string, fn func([]byte)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in %s: %v", dir, err)
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if len(strings.TrimSpace(sc.Text())) > 0 {
				fn(sc.Bytes())
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
}
