package nexmark

import (
	"bytes"
	"context"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testConfig is the small data set of the agreement tests: 30,000 events at
// 5 a second span 100 minutes of event time from 07:59 (so q14's bands and
// q11's sessions see both sides of 8:00), 8 files a stream, disorder 30 s.
var testConfig = Config{
	Events:          30000,
	Seed:            7,
	EventsPerSecond: 5,
	MaxDelay:        30 * time.Second,
	Files:           8,
	Formats:         []string{Parquet, JSONL},
}

var (
	testDataOnce sync.Once
	testDataDir  string
	testDataErr  error
)

// testData generates testConfig once per test binary.
func testData(t *testing.T) Layout {
	t.Helper()
	testDataOnce.Do(func() {
		testDataDir, testDataErr = os.MkdirTemp("", "nexmark-test-")
		if testDataErr == nil {
			_, _, testDataErr = Generate(testDataDir, testConfig, nil)
		}
	})
	if testDataErr != nil {
		t.Fatal(testDataErr)
	}
	return Layout{Dir: testDataDir}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testDataDir != "" {
		os.RemoveAll(testDataDir)
	}
	os.Exit(code)
}

func TestCounts(t *testing.T) {
	for _, n := range []int64{0, 1, 2, 4, 5, 49, 50, 51, 1000, 12345} {
		var want [3]int64
		for id := range n {
			switch off := id % ProportionDenom; {
			case off < PersonProportion:
				want[0]++
			case off < PersonProportion+AuctionProportion:
				want[1]++
			default:
				want[2]++
			}
		}
		p, a, b := Counts(n)
		if [3]int64{p, a, b} != want {
			t.Errorf("Counts(%d) = %d, %d, %d, want %v", n, p, a, b, want)
		}
	}
}

// TestGeneratorShape checks the Nexmark shape on 100,000 events: the 1:3:46
// mix, ids issued in order, every reference to a person or auction already
// issued, the hot auction, bidder and seller shares, prices, categories and
// channels.
func TestGeneratorShape(t *testing.T) {
	g, err := NewGenerator(Config{Events: 100000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	c := g.Config()
	var persons, auctions, bids int64
	lastPerson, lastAuction := int64(FirstPersonID-1), int64(FirstAuctionID-1)
	var hotBids, hotBidders, hotSellers, hotChannel, withChannelID int64
	auctionBids := map[int64]int64{}
	for {
		e, ok := g.Next()
		if !ok {
			break
		}
		if want := c.Start.UnixMicro() + e.ID*100; g.TimeUs(e.ID) != want {
			t.Fatalf("event %d at %d µs, want %d (10,000 events/s)", e.ID, g.TimeUs(e.ID), want)
		}
		switch {
		case e.Person != nil:
			persons++
			if e.Person.ID != lastPerson+1 {
				t.Fatalf("event %d: person id %d after %d", e.ID, e.Person.ID, lastPerson)
			}
			lastPerson = e.Person.ID
			if !slices.Contains(usStates, e.Person.State) || !slices.Contains(usCities, e.Person.City) {
				t.Fatalf("person %+v: state or city not in the Nexmark lists", e.Person)
			}
		case e.Auction != nil:
			auctions++
			a := e.Auction
			if a.ID != lastAuction+1 {
				t.Fatalf("event %d: auction id %d after %d", e.ID, a.ID, lastAuction)
			}
			lastAuction = a.ID
			if a.Seller < FirstPersonID || a.Seller > lastPerson {
				t.Fatalf("auction %d: seller %d not issued yet (last person %d)", a.ID, a.Seller, lastPerson)
			}
			if (a.Seller-FirstPersonID)%HotSellerRatio == 0 && a.Seller-FirstPersonID == (lastPerson-FirstPersonID)/HotSellerRatio*HotSellerRatio {
				hotSellers++
			}
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories {
				t.Fatalf("auction %d: category %d", a.ID, a.Category)
			}
			if a.Reserve <= a.InitialBid || a.Expires <= a.DateTime {
				t.Fatalf("auction %d: reserve %d <= initial bid %d or expires before it starts", a.ID, a.Reserve, a.InitialBid)
			}
		default:
			bids++
			b := e.Bid
			if b.Auction < FirstAuctionID || b.Auction > lastAuction {
				t.Fatalf("bid at event %d: auction %d not issued yet (last %d)", e.ID, b.Auction, lastAuction)
			}
			if b.Bidder < FirstPersonID || b.Bidder > lastPerson {
				t.Fatalf("bid at event %d: bidder %d not issued yet (last %d)", e.ID, b.Bidder, lastPerson)
			}
			if b.Auction-FirstAuctionID == (lastAuction-FirstAuctionID)/HotAuctionRatio*HotAuctionRatio {
				hotBids++
			}
			if hb := (lastPerson-FirstPersonID)/HotBidderRatio*HotBidderRatio + 1; b.Bidder-FirstPersonID == min(hb, lastPerson-FirstPersonID) {
				hotBidders++
			}
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("bid price %d outside Nexmark's [100, 1e8] cents", b.Price)
			}
			if slices.Contains(hotChannels, b.Channel) {
				hotChannel++
			} else if !strings.HasPrefix(b.Channel, "channel-") {
				t.Fatalf("bid channel %q", b.Channel)
			} else if strings.Contains(b.URL, "&channel_id=") {
				withChannelID++
			}
			if !strings.HasPrefix(b.URL, "https://www.nexmark.com/") {
				t.Fatalf("bid url %q", b.URL)
			}
			auctionBids[b.Auction]++
		}
	}
	wp, wa, wb := Counts(100000)
	if persons != wp || auctions != wa || bids != wb || persons*3 != auctions || persons*46 != bids {
		t.Errorf("mix %d:%d:%d, want %d:%d:%d (1:3:46)", persons, auctions, bids, wp, wa, wb)
	}
	share := func(name string, n, of int64, want float64) {
		t.Helper()
		// A cold pick can land on the hot key too, so the share is at least
		// the hot ratio's and a little more.
		if got := float64(n) / float64(of); got < want-0.02 || got > want+0.05 {
			t.Errorf("%s share %.3f, want about %.2f", name, got, want)
		}
	}
	share("hot auction", hotBids, bids, 0.5)    // 1 - 1/2
	share("hot bidder", hotBidders, bids, 0.75) // 1 - 1/4
	share("hot seller", hotSellers, auctions, 0.75)
	share("hot channel", hotChannel, bids, 0.5)
	if f := float64(withChannelID) / float64(bids-hotChannel); f < 0.85 || f > 0.95 {
		t.Errorf("%.3f of cold-channel bids carry a channel_id, want about 0.9", f)
	}
	// Hot keys: the busiest auction gets far more than an even share.
	var top int64
	for _, n := range auctionBids {
		top = max(top, n)
	}
	if even := bids / int64(len(auctionBids)); top < 20*even {
		t.Errorf("busiest auction has %d bids, even share %d: no hot key", top, even)
	}
}

// TestReorderBoundedDisorder: Reorder yields every event once, in
// non-decreasing arrival order, no event behind an earlier-yielded one by
// MaxDelay or more of event time, and with real disorder; the events
// themselves do not depend on MaxDelay.
func TestReorderBoundedDisorder(t *testing.T) {
	const n = 20000
	cfg := Config{Events: n, Seed: 5, EventsPerSecond: 1000, MaxDelay: 250 * time.Millisecond}
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, n)
	var maxTS, lastArrival int64 = math.MinInt64, math.MinInt64
	var behind int
	bound := cfg.MaxDelay.Microseconds()
	err = g.Reorder(func(e Event) error {
		if seen[e.ID] {
			t.Fatalf("event %d yielded twice", e.ID)
		}
		seen[e.ID] = true
		if e.Arrival < lastArrival {
			t.Fatalf("event %d arrives at %d after an arrival at %d", e.ID, e.Arrival, lastArrival)
		}
		lastArrival = e.Arrival
		ts := g.TimeUs(e.ID)
		if maxTS != math.MinInt64 && ts <= maxTS-bound {
			t.Fatalf("event %d at %d is %d µs behind the newest (%d): bound %d", e.ID, ts, maxTS-ts, maxTS, bound)
		}
		if ts < maxTS {
			behind++
		}
		maxTS = max(maxTS, ts)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(seen, false); i >= 0 {
		t.Fatalf("event %d never yielded", i)
	}
	if behind < n/4 {
		t.Errorf("only %d of %d events out of order: the shuffle does not shuffle", behind, n)
	}
	// Same events with and without disorder.
	g1, _ := NewGenerator(cfg)
	cfg.MaxDelay = time.Microsecond
	g2, _ := NewGenerator(cfg)
	for {
		a, ok1 := g1.Next()
		b, ok2 := g2.Next()
		if ok1 != ok2 {
			t.Fatal("event counts differ with the delay")
		}
		if !ok1 {
			break
		}
		a.Arrival, b.Arrival = 0, 0
		if a.Stream() != b.Stream() || (a.Bid != nil && *a.Bid != *b.Bid) || (a.Auction != nil && *a.Auction != *b.Auction) ||
			(a.Person != nil && *a.Person != *b.Person) {
			t.Fatalf("event %d differs when only the delay changes", a.ID)
		}
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGenerateDeterministic: the same config gives byte-identical files; a
// different seed does not.
func TestGenerateDeterministic(t *testing.T) {
	cfg := Config{Events: 5000, Seed: 11, Files: 3}
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if _, _, err := Generate(d, cfg, nil); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Seed = 12
	if _, _, err := Generate(c, cfg, nil); err != nil {
		t.Fatal(err)
	}
	ta, tb, tc := readTree(t, a), readTree(t, b), readTree(t, c)
	// 2 formats x (3 streams x 3 files + 1 side input) + the marker.
	if len(ta) != 2*(3*3+1)+1 {
		t.Fatalf("%d files generated: %v", len(ta), slices.Sorted(func(yield func(string) bool) {
			for k := range ta {
				if !yield(k) {
					return
				}
			}
		}))
	}
	for name, data := range ta {
		if !bytes.Equal(data, tb[name]) {
			t.Errorf("%s differs between two runs of one config", name)
		}
	}
	if f := filepath.Join(Parquet, Bids, "bids-00001.parquet"); bytes.Equal(ta[f], tc[f]) {
		t.Errorf("%s is the same for seeds 11 and 12", f)
	}
}

// TestGeneratedFiles reads the test data set back with DuckDB: both formats
// hold the same rows, each stream has its Nexmark count, files are in
// arrival order with disorder below MaxDelay, and every bid's auction and
// bidder exist.
func TestGeneratedFiles(t *testing.T) {
	l := testData(t)
	ctx := context.Background()
	db, err := OpenDuckDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := func(format, stream string) string {
		s, err := DuckSQL(Query{SQL: "{" + stream + "}"}, l.Dir, format, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	one := func(q string) int64 {
		t.Helper()
		var n int64
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	wp, wa, wb := Counts(testConfig.Events)
	want := map[string]int64{Persons: wp, Auctions: wa, Bids: wb, SideInput: DefaultSideInputRows}
	for stream, n := range want {
		for _, f := range testConfig.Formats {
			if got := one("SELECT count(*) FROM " + src(f, stream)); got != n {
				t.Errorf("%s %s: %d rows, want %d", f, stream, got, n)
			}
		}
		if d := one("SELECT count(*) FROM (SELECT * FROM " + src(Parquet, stream) + " EXCEPT ALL SELECT * FROM " + src(JSONL, stream) + ")"); d != 0 {
			t.Errorf("%s: %d Parquet rows not in the JSON lines", stream, d)
		}
	}
	// Disorder: within the files in name order, no row is MaxDelay or more
	// behind the newest row before it; and some rows are behind.
	bound := testConfig.MaxDelay.Microseconds()
	q := `WITH r AS (SELECT epoch_us(dateTime) AS t, filename, row_number() OVER () AS i FROM read_parquet(` +
		sqlString(filepath.Join(l.StreamDir(Parquet, Bids), "*.parquet")) + `, filename = true)),
m AS (SELECT t, max(t) OVER (ORDER BY filename, i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS newest FROM r)
SELECT count(*) FILTER (WHERE t <= newest - ` + strconv.FormatInt(bound, 10) + `), count(*) FILTER (WHERE t < newest) FROM m`
	var over, behind int64
	if err := db.QueryRowContext(ctx, q).Scan(&over, &behind); err != nil {
		t.Fatal(err)
	}
	if over != 0 || behind < wb/10 {
		t.Errorf("bids: %d rows beyond the disorder bound, %d behind the newest (want 0 and >= %d)", over, behind, wb/10)
	}
	if n := one("SELECT count(*) FROM " + src(Parquet, Bids) + " b ANTI JOIN " + src(Parquet, Auctions) + " a ON b.auction = a.id"); n != 0 {
		t.Errorf("%d bids name an auction that does not exist", n)
	}
	if n := one("SELECT count(*) FROM " + src(Parquet, Bids) + " b ANTI JOIN " + src(Parquet, Persons) + " p ON b.bidder = p.id"); n != 0 {
		t.Errorf("%d bids name a bidder that does not exist", n)
	}
	if n := one("SELECT count(*) FROM " + src(Parquet, Bids) + " b JOIN " + src(Parquet, Auctions) + " a ON b.auction = a.id WHERE b.dateTime < a.dateTime"); n != 0 {
		t.Errorf("%d bids are older than their auction", n)
	}
}

// TestSpecs: every query has a spec, every spec a query; each runnable one
// fills in and parses, and a graph one says needs: graph.
func TestSpecs(t *testing.T) {
	names := map[string]bool{}
	for _, q := range Queries() {
		names[q.Name] = true
		tmpl, err := q.Spec()
		if err != nil {
			t.Errorf("%s: %v", q.Name, err)
			continue
		}
		if !q.Runnable() && !bytes.Contains(tmpl, []byte("needs: graph")) {
			t.Errorf("%s: a graph query's spec does not say needs: graph", q.Name)
		}
		// Every spec, graph ones too, fills in and passes the spec checks
		// (column checks happen when the engine compiles the plan).
		dir := t.TempDir()
		if _, err := Pipeline(q, FloeJob{Query: q.Name, Data: dir, Format: Parquet, Sink: filepath.Join(dir, "out"),
			State: filepath.Join(dir, "state"), MaxDelay: time.Second}); err != nil {
			t.Errorf("%s: %v", q.Name, err)
		}
	}
	entries, err := specs.ReadDir("queries")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue // queries/*.sql: the Flink SQL versions, checked by TestSQLQueries
		}
		if n := strings.TrimSuffix(e.Name(), ".yaml"); !names[n] {
			t.Errorf("queries/%s has no query in the list", e.Name())
		}
	}
	if _, err := Expand([]byte("a ${X} ${Y}"), map[string]string{"X": "1"}); err == nil || !strings.Contains(err.Error(), "${Y}") {
		t.Errorf("Expand with a missing value: %v, want an error naming ${Y}", err)
	}
	if _, err := Lookup("q0,q99"); err == nil || !strings.Contains(err.Error(), "q99") {
		t.Errorf("Lookup of an unknown query: %v", err)
	}
}

// TestQueriesAgree runs every runnable query with floe (several epochs, then
// the drain) and DuckDB over the test data set and compares the outputs row
// for row. Parquet for all; JSON lines for a few.
func TestQueriesAgree(t *testing.T) {
	l := testData(t)
	ctx := context.Background()
	jsonl := map[string]bool{"q0": true, "q11": true, "q13": true, "q14": true}
	for _, q := range Queries() {
		if !q.Runnable() {
			continue
		}
		for _, format := range []string{Parquet, JSONL} {
			if format == JSONL && !jsonl[q.Name] {
				continue
			}
			t.Run(q.Name+"/"+format, func(t *testing.T) {
				dir := t.TempDir()
				fr, err := RunFloe(ctx, FloeJob{Query: q.Name, Data: l.Dir, Format: format,
					Sink: filepath.Join(dir, "out"), State: filepath.Join(dir, "state"), Parallelism: 2,
					MaxDelay: testConfig.MaxDelay, MaxFilesPerEpoch: 3})
				if err != nil {
					t.Fatal(err)
				}
				if fr.RowsLate != 0 || fr.Epochs < 3 {
					t.Errorf("floe: %d late rows, %d epochs (want 0 late, >= 3 epochs)", fr.RowsLate, fr.Epochs)
				}
				out := filepath.Join(dir, "duck.parquet")
				dr, err := RunDuckDB(ctx, DuckJob{Query: q.Name, Data: l.Dir, Format: format, Out: out})
				if err != nil {
					t.Fatal(err)
				}
				if dr.Rows == 0 {
					t.Fatalf("DuckDB's answer is empty: the test data does not exercise %s", q.Name)
				}
				c, err := Compare(ctx, fr.Outputs, out)
				if err != nil {
					t.Fatal(err)
				}
				if !c.Equal() || c.DuckDBRows != dr.Rows {
					t.Errorf("outputs differ on %v: %s", c.Columns, c)
				}
				if q.Name == "q10" { // PARTITIONED BY (dt, hm): Hive folders
					for _, f := range fr.Outputs {
						rel, _ := filepath.Rel(filepath.Join(dir, "out"), f)
						if !regexp.MustCompile(`^dt=\d{4}-\d\d-\d\d/hm=\d\d%3A\d\d/part-[^/]+\.parquet$`).MatchString(filepath.ToSlash(rel)) {
							t.Fatalf("q10 output %s is not in a dt=yyyy-MM-dd/hm=HH%%3Amm folder", rel)
						}
					}
				}
				if q.Name != "q2" || format != Parquet {
					return
				}
				// The comparison sees one changed row: a copy of DuckDB's
				// answer with the first row's price off by one.
				db, err := OpenDuckDB(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				bad := filepath.Join(dir, "bad.parquet")
				if _, err := db.ExecContext(ctx, "COPY (SELECT auction, price + (row_number() OVER () = 1)::BIGINT AS price FROM read_parquet("+
					sqlString(out)+")) TO "+sqlString(bad)+" (FORMAT parquet)"); err != nil {
					t.Fatal(err)
				}
				c, err = Compare(ctx, fr.Outputs, bad)
				if err != nil {
					t.Fatal(err)
				}
				if c.Equal() || c.OnlyFloe != 1 || c.OnlyDuckDB != 1 {
					t.Errorf("one changed row: %s, want one row only in each", c)
				}
			})
		}
	}
}

// TestGraphQueries: a query that needs a graph is refused by the floe
// runner, and its reference SQL runs on the test data.
func TestGraphQueries(t *testing.T) {
	l := testData(t)
	ctx := context.Background()
	// A marked query is refused (every listed query runs today, so a
	// made-up one stands in).
	saved := queries
	queries = append(queries[:len(queries):len(queries)], Query{Name: "qx", Needs: NeedsGraph, SQL: "SELECT 1 AS x"})
	defer func() { queries = saved }()
	if _, err := RunFloe(ctx, FloeJob{Query: "qx", Data: l.Dir, Format: Parquet, Sink: t.TempDir(), State: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not runnable yet") {
		t.Errorf("qx: RunFloe = %v, want not runnable yet", err)
	}
	queries = saved
	for _, q := range Queries() {
		if q.Runnable() {
			continue
		}
		dir := t.TempDir()
		_, err := RunFloe(ctx, FloeJob{Query: q.Name, Data: l.Dir, Format: Parquet, Sink: dir, State: dir})
		if err == nil || !strings.Contains(err.Error(), "not runnable yet") {
			t.Errorf("%s: RunFloe = %v, want not runnable yet", q.Name, err)
		}
		dr, err := RunDuckDB(ctx, DuckJob{Query: q.Name, Data: l.Dir, Format: Parquet, Out: filepath.Join(dir, "duck.parquet")})
		if err != nil {
			t.Errorf("%s: %v", q.Name, err)
			continue
		}
		t.Logf("%s: DuckDB reference answer has %d rows", q.Name, dr.Rows)
	}
}

// TestGraphQueriesTry runs the graph queries through the engine and compares
// them with the reference, for whoever brings up the graph engine:
// FLOE_NEXMARK_GRAPH=1 go test -run TestGraphQueriesTry -v ./nexmark/
// A query that passes here can lose its Needs mark.
func TestGraphQueriesTry(t *testing.T) {
	if os.Getenv("FLOE_NEXMARK_GRAPH") == "" {
		t.Skip("set FLOE_NEXMARK_GRAPH=1 to run the graph queries through the engine")
	}
	l := testData(t)
	ctx := context.Background()
	for _, q := range Queries() {
		if q.Runnable() {
			continue
		}
		t.Run(q.Name, func(t *testing.T) {
			dir := t.TempDir()
			fr, err := RunFloe(ctx, FloeJob{Query: q.Name, Data: l.Dir, Format: Parquet, Sink: filepath.Join(dir, "out"),
				State: filepath.Join(dir, "state"), Parallelism: 2, MaxDelay: testConfig.MaxDelay, MaxFilesPerEpoch: 3, TryGraph: true})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "duck.parquet")
			if _, err := RunDuckDB(ctx, DuckJob{Query: q.Name, Data: l.Dir, Format: Parquet, Out: out}); err != nil {
				t.Fatal(err)
			}
			c, err := Compare(ctx, fr.Outputs, out)
			if err != nil {
				t.Fatal(err)
			}
			if !c.Equal() || fr.RowsLate != 0 {
				t.Errorf("outputs differ on %v: %s; %d late rows", c.Columns, c, fr.RowsLate)
			}
		})
	}
}
