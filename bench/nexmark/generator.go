// Package nexmark is floe's auction-shaped (Nexmark) benchmark: a
// deterministic generator of the three Nexmark streams (persons, auctions,
// bids) with hot keys and bounded event-time disorder, written as Parquet and
// JSON-lines files, the well-known Nexmark queries as floe pipeline specs
// (queries/*.yaml) and as DuckDB reference SQL, and a harness that runs both
// over the same files and compares the outputs row for row.
//
// The generator follows the Beam / Flink Nexmark generator (event mix 1
// person : 3 auctions : 46 bids, ids derived from the event number, hot
// auctions, bidders and sellers, log-uniform prices, channels and URLs); the
// deviations are listed in README.md.
package nexmark

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/formats"
)

// Nexmark's fixed proportions and id bases (GeneratorConfig in Beam and in
// nexmark/nexmark).
const (
	PersonProportion     = 1
	AuctionProportion    = 3
	BidProportion        = 46
	ProportionDenom      = PersonProportion + AuctionProportion + BidProportion
	FirstPersonID        = 1000
	FirstAuctionID       = 1000
	FirstCategoryID      = 10
	NumCategories        = 5
	HotAuctionRatio      = 100 // a hot auction is the first of each batch of 100 auctions
	HotBidderRatio       = 100 // a hot bidder is the second of each batch of 100 persons
	HotSellerRatio       = 100 // a hot seller is the first of each batch of 100 persons
	HotChannelsRatio     = 2   // 1 - 1/2 of bids come through one of the four hot channels
	ChannelsNumber       = 10000
	DefaultSideInputRows = 10000 // q13's side input keys (auction % rows)
)

// Formats the generator writes.
const (
	Parquet = "parquet"
	JSONL   = "jsonl"
)

// Streams: the folder (and file prefix) of each stream and of the side input.
const (
	Persons   = "persons"
	Auctions  = "auctions"
	Bids      = "bids"
	SideInput = "side_input"
)

var (
	hotChannels = []string{"Google", "Facebook", "Baidu", "Apple"}
	usStates    = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities    = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend",
		"Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
		"Deiter", "Walter"}
	lastNames = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
		"Noris"}
)

// Config describes one generated data set. Equal configs give byte-identical
// files.
type Config struct {
	Events          int64         // total events (persons + auctions + bids)
	Seed            uint64        // random seed
	EventsPerSecond float64       // event-time rate: event i has time Start + i/EventsPerSecond
	MaxDelay        time.Duration // disorder bound: an event lands in the files up to this much after its event time
	Files           int           // files per stream and format
	Start           time.Time     // event time of event 0
	Formats         []string      // Parquet and/or JSONL

	NumActivePeople     int64 // persons a new auction or bid picks from (Nexmark: 1000)
	NumInFlightAuctions int64 // auctions a cold bid picks from (Nexmark: 100)
	HotAuctionRatio     int   // 1 - 1/r of bids go to the hot auction (Nexmark: 2)
	HotBiddersRatio     int   // 1 - 1/r of bids come from the hot bidder (Nexmark: 4)
	HotSellersRatio     int   // 1 - 1/r of auctions are by the hot seller (Nexmark: 4)
	IDLead              int64 // ids a cold pick may run ahead of the last issued one (Nexmark: 10; default 0)
	AvgPersonBytes      int   // sizes the extra column (Nexmark: 200)
	AvgAuctionBytes     int   // (Nexmark: 500)
	AvgBidBytes         int   // (Nexmark: 100)
	SideInputRows       int   // rows of the q13 side input (default 10000)
}

// DefaultStart is the default event time of the first event: 07:59 UTC, so
// that a run of more than a minute of event time crosses q14's 8:00 band.
var DefaultStart = time.Date(2024, 6, 1, 7, 59, 0, 0, time.UTC)

// WithDefaults returns c with zero fields set to the Nexmark defaults.
func (c Config) WithDefaults() Config {
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.EventsPerSecond == 0 {
		c.EventsPerSecond = 10000
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = 2 * time.Second
	}
	if c.Files == 0 {
		c.Files = 10
	}
	if c.Start.IsZero() {
		c.Start = DefaultStart
	}
	if len(c.Formats) == 0 {
		c.Formats = []string{Parquet, JSONL}
	}
	setInt64 := func(p *int64, v int64) {
		if *p == 0 {
			*p = v
		}
	}
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setInt64(&c.NumActivePeople, 1000)
	setInt64(&c.NumInFlightAuctions, 100)
	setInt(&c.HotAuctionRatio, 2)
	setInt(&c.HotBiddersRatio, 4)
	setInt(&c.HotSellersRatio, 4)
	setInt(&c.AvgPersonBytes, 200)
	setInt(&c.AvgAuctionBytes, 500)
	setInt(&c.AvgBidBytes, 100)
	setInt(&c.SideInputRows, DefaultSideInputRows)
	return c
}

// Validate reports a config that cannot be generated (after WithDefaults).
func (c Config) Validate() error {
	var errs []error
	if c.Events < ProportionDenom {
		errs = append(errs, fmt.Errorf("events must be >= %d (one Nexmark epoch), got %d", ProportionDenom, c.Events))
	}
	if c.EventsPerSecond <= 0 || c.EventsPerSecond > 1e6 {
		errs = append(errs, fmt.Errorf("events per second must be in (0, 1e6], got %g", c.EventsPerSecond))
	}
	if c.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("max delay must be >= 0, got %s", c.MaxDelay))
	}
	if c.Files < 1 {
		errs = append(errs, fmt.Errorf("files must be >= 1, got %d", c.Files))
	}
	for _, f := range c.Formats {
		if f != Parquet && f != JSONL {
			errs = append(errs, fmt.Errorf("format must be parquet or jsonl, got %q", f))
		}
	}
	if c.NumActivePeople < 1 || c.NumInFlightAuctions < 1 || c.IDLead < 0 {
		errs = append(errs, errors.New("active people and in-flight auctions must be >= 1, id lead >= 0"))
	}
	if c.HotAuctionRatio < 1 || c.HotBiddersRatio < 1 || c.HotSellersRatio < 1 {
		errs = append(errs, errors.New("hot ratios must be >= 1"))
	}
	if c.SideInputRows < 1 {
		errs = append(errs, fmt.Errorf("side input rows must be >= 1, got %d", c.SideInputRows))
	}
	return errors.Join(errs...)
}

// Counts returns how many of the first n events are persons, auctions and
// bids.
func Counts(n int64) (persons, auctions, bids int64) {
	full, rem := n/ProportionDenom, n%ProportionDenom
	persons = full*PersonProportion + min(rem, PersonProportion)
	auctions = full*AuctionProportion + min(max(rem-PersonProportion, 0), AuctionProportion)
	return persons, auctions, n - persons - auctions
}

// lastBase0PersonID is the id (base 0) of the last person issued at or
// before event id.
func lastBase0PersonID(id int64) int64 {
	epoch, off := id/ProportionDenom, id%ProportionDenom
	if off >= PersonProportion {
		off = PersonProportion - 1
	}
	return epoch*PersonProportion + off
}

// lastBase0AuctionID is the id (base 0) of the last auction issued at or
// before event id (-1 before the first).
func lastBase0AuctionID(id int64) int64 {
	epoch, off := id/ProportionDenom, id%ProportionDenom
	switch {
	case off < PersonProportion:
		epoch--
		off = AuctionProportion - 1
	case off >= PersonProportion+AuctionProportion:
		off = AuctionProportion - 1
	default:
		off -= PersonProportion
	}
	return epoch*AuctionProportion + off
}

// Person is one person event.
type Person struct {
	ID                                   int64
	Name, EmailAddress, CreditCard, City string
	State                                string
	DateTime                             int64 // µs since 1970
	Extra                                string
}

// Auction is one auction event.
type Auction struct {
	ID                    int64
	ItemName, Description string
	InitialBid, Reserve   int64
	DateTime, Expires     int64 // µs
	Seller, Category      int64
	Extra                 string
}

// Bid is one bid event.
type Bid struct {
	Auction, Bidder, Price int64
	Channel, URL           string
	DateTime               int64 // µs
	Extra                  string
}

// Event is one generated event: exactly one of the pointers is set.
type Event struct {
	ID      int64 // event number, 0-based
	Arrival int64 // µs: the order it lands in the files (DateTime + delay)
	Person  *Person
	Auction *Auction
	Bid     *Bid
}

// Stream names the stream of e.
func (e *Event) Stream() string {
	switch {
	case e.Person != nil:
		return Persons
	case e.Auction != nil:
		return Auctions
	default:
		return Bids
	}
}

// Generator produces the events of a Config in event-number order.
type Generator struct {
	c        Config
	rng      *rand.Rand // event contents
	delays   *rand.Rand // arrival delays: the events do not depend on MaxDelay
	interUs  float64
	startUs  int64
	hotURLs  []string
	chanURLs []string
	next     int64
}

// NewGenerator returns a generator of c (defaults applied).
func NewGenerator(c Config) (*Generator, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("nexmark config: %w", err)
	}
	g := &Generator{
		c:       c,
		rng:     rand.New(rand.NewPCG(c.Seed, 0x6e65786d61726b01)),
		delays:  rand.New(rand.NewPCG(c.Seed, 0x6e65786d61726b02)),
		interUs: 1e6 / c.EventsPerSecond,
		startUs: c.Start.UnixMicro(),
	}
	// Channel URLs, like nexmark/nexmark's CHANNEL_URL_CACHE: 9 in 10
	// carry a channel_id parameter (the bit-reversed channel number).
	urls := rand.New(rand.NewPCG(c.Seed, 0x6e65786d61726b03))
	for range hotChannels {
		g.hotURLs = append(g.hotURLs, baseURL(urls))
	}
	g.chanURLs = make([]string, ChannelsNumber)
	for i := range g.chanURLs {
		u := baseURL(urls)
		if urls.IntN(10) > 0 {
			u += "&channel_id=" + strconv.FormatInt(abs64(int64(int32(bits.Reverse32(uint32(i))))), 10)
		}
		g.chanURLs[i] = u
	}
	return g, nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Config returns the generator's config with defaults applied.
func (g *Generator) Config() Config { return g.c }

// TimeUs returns the event time of event id in µs.
func (g *Generator) TimeUs(id int64) int64 {
	return g.startUs + int64(float64(id)*g.interUs)
}

// Next returns the next event in event-number order, or false after the last.
func (g *Generator) Next() (Event, bool) {
	if g.next >= g.c.Events {
		return Event{}, false
	}
	id := g.next
	g.next++
	ts := g.TimeUs(id)
	e := Event{ID: id, Arrival: ts}
	if d := g.c.MaxDelay.Microseconds(); d > 0 {
		e.Arrival += g.delays.Int64N(d)
	}
	switch off := id % ProportionDenom; {
	case off < PersonProportion:
		e.Person = g.person(id, ts)
	case off < PersonProportion+AuctionProportion:
		e.Auction = g.auction(id, ts)
	default:
		e.Bid = g.bid(id, ts)
	}
	return e, true
}

// nextBase0PersonID picks one of the active persons (plus IDLead ahead).
func (g *Generator) nextBase0PersonID(id int64) int64 {
	n := lastBase0PersonID(id) + 1
	active := min(n, g.c.NumActivePeople)
	return n - active + g.rng.Int64N(active+g.c.IDLead)
}

// nextBase0AuctionID picks one of the in-flight auctions (plus IDLead ahead).
func (g *Generator) nextBase0AuctionID(id int64) int64 {
	last := lastBase0AuctionID(id)
	lo := max(last-g.c.NumInFlightAuctions, 0)
	return lo + g.rng.Int64N(last-lo+1+g.c.IDLead)
}

// nextPrice is Nexmark's log-uniform price in cents: 10^(6u) * 100.
func (g *Generator) nextPrice() int64 {
	return int64(math.Round(math.Pow(10, g.rng.Float64()*6) * 100))
}

const letters = "abcdefghijklmnopqrstuvwxyz"

// nextString returns 3..max-1 lowercase letters, an occasional space (or
// special) among them, like Nexmark's StringsGenerator.nextString.
func nextString(r *rand.Rand, maxLen int, special byte) string {
	n := 3 + r.IntN(maxLen-3)
	b := make([]byte, n)
	for i := range b {
		if r.IntN(13) == 0 {
			b[i] = special
		} else {
			b[i] = letters[r.IntN(len(letters))]
		}
	}
	return string(b)
}

// nextExtra pads a record to about avg bytes: a random string of the
// remaining size ±20% (Nexmark's StringsGenerator.nextExtra).
func (g *Generator) nextExtra(current, avg int) string {
	if current > avg {
		return ""
	}
	avg -= current
	delta := int(math.Round(float64(avg) * 0.2))
	size := avg - delta
	if delta > 0 {
		size += g.rng.IntN(2 * delta)
	}
	b := make([]byte, size)
	for i := 0; i < size; {
		v := g.rng.Uint64()
		for k := 0; k < 12 && i < size; k++ {
			c := v & 31
			v >>= 5
			if c >= 26 {
				b[i] = ' '
			} else {
				b[i] = letters[c]
			}
			i++
		}
	}
	return string(b)
}

func baseURL(r *rand.Rand) string {
	return "https://www.nexmark.com/" + nextString(r, 5, '_') + "/" + nextString(r, 5, '_') + "/" +
		nextString(r, 5, '_') + "/item.htm?query=1"
}

func (g *Generator) person(id, ts int64) *Person {
	p := &Person{ID: lastBase0PersonID(id) + FirstPersonID, DateTime: ts}
	p.Name = firstNames[g.rng.IntN(len(firstNames))] + " " + lastNames[g.rng.IntN(len(lastNames))]
	p.EmailAddress = nextString(g.rng, 7, ' ') + "@" + nextString(g.rng, 5, ' ') + ".com"
	p.CreditCard = fmt.Sprintf("%04d %04d %04d %04d", g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000))
	p.City = usCities[g.rng.IntN(len(usCities))]
	p.State = usStates[g.rng.IntN(len(usStates))]
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.nextExtra(size, g.c.AvgPersonBytes)
	return p
}

func (g *Generator) auction(id, ts int64) *Auction {
	a := &Auction{ID: lastBase0AuctionID(id) + FirstAuctionID, DateTime: ts}
	last := lastBase0PersonID(id)
	if g.rng.IntN(g.c.HotSellersRatio) > 0 {
		a.Seller = last / HotSellerRatio * HotSellerRatio
	} else {
		a.Seller = g.nextBase0PersonID(id)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(g.rng.IntN(NumCategories))
	a.InitialBid = g.nextPrice()
	// Auction length: uniform in [1, 2*horizon] µs, the horizon being the
	// event time until NumInFlightAuctions more auctions have been issued.
	horizonUs := int64(float64(g.c.NumInFlightAuctions*ProportionDenom/AuctionProportion) * g.interUs)
	a.Expires = ts + 1 + g.rng.Int64N(max(2*horizonUs, 1))
	a.ItemName = nextString(g.rng, 20, ' ')
	a.Description = nextString(g.rng, 100, ' ')
	a.Reserve = a.InitialBid + g.nextPrice()
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = g.nextExtra(size, g.c.AvgAuctionBytes)
	return a
}

func (g *Generator) bid(id, ts int64) *Bid {
	b := &Bid{DateTime: ts}
	if g.rng.IntN(g.c.HotAuctionRatio) > 0 {
		b.Auction = lastBase0AuctionID(id) / HotAuctionRatio * HotAuctionRatio
	} else {
		b.Auction = g.nextBase0AuctionID(id)
	}
	b.Auction += FirstAuctionID
	last := lastBase0PersonID(id)
	if g.rng.IntN(g.c.HotBiddersRatio) > 0 {
		// The second person of the batch; clamped to the last issued person
		// so a bid never names a person that does not exist yet.
		b.Bidder = min(last/HotBidderRatio*HotBidderRatio+1, last)
	} else {
		b.Bidder = g.nextBase0PersonID(id)
	}
	b.Bidder += FirstPersonID
	b.Price = g.nextPrice()
	if g.rng.IntN(HotChannelsRatio) > 0 {
		i := g.rng.IntN(len(hotChannels))
		b.Channel, b.URL = hotChannels[i], g.hotURLs[i]
	} else {
		i := g.rng.IntN(ChannelsNumber)
		b.Channel, b.URL = "channel-"+strconv.Itoa(i), g.chanURLs[i]
	}
	b.Extra = g.nextExtra(8+8+8+8, g.c.AvgBidBytes)
	return b
}

// Reorder returns the events of g in arrival order (ties by event number):
// a bounded-delay shuffle, each event moved back by less than MaxDelay of
// event time. It holds only the events within MaxDelay of the newest.
func (g *Generator) Reorder(yield func(Event) error) error {
	var h eventHeap
	for {
		e, ok := g.Next()
		if !ok {
			break
		}
		heap.Push(&h, e)
		// No later event arrives before its own time, which is >= this one's.
		now := g.TimeUs(e.ID)
		for len(h) > 0 && h[0].Arrival <= now {
			if err := yield(heap.Pop(&h).(Event)); err != nil {
				return err
			}
		}
	}
	for len(h) > 0 {
		if err := yield(heap.Pop(&h).(Event)); err != nil {
			return err
		}
	}
	return nil
}

type eventHeap []Event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].Arrival != h[j].Arrival {
		return h[i].Arrival < h[j].Arrival
	}
	return h[i].ID < h[j].ID
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(Event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

var tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// Schemas of the written files, in column order (Nexmark's field names).
var (
	PersonSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "emailAddress", Type: arrow.BinaryTypes.String},
		{Name: "creditCard", Type: arrow.BinaryTypes.String},
		{Name: "city", Type: arrow.BinaryTypes.String},
		{Name: "state", Type: arrow.BinaryTypes.String},
		{Name: "dateTime", Type: tsType},
		{Name: "extra", Type: arrow.BinaryTypes.String},
	}, nil)
	AuctionSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "itemName", Type: arrow.BinaryTypes.String},
		{Name: "description", Type: arrow.BinaryTypes.String},
		{Name: "initialBid", Type: arrow.PrimitiveTypes.Int64},
		{Name: "reserve", Type: arrow.PrimitiveTypes.Int64},
		{Name: "dateTime", Type: tsType},
		{Name: "expires", Type: tsType},
		{Name: "seller", Type: arrow.PrimitiveTypes.Int64},
		{Name: "category", Type: arrow.PrimitiveTypes.Int64},
		{Name: "extra", Type: arrow.BinaryTypes.String},
	}, nil)
	BidSchema = arrow.NewSchema([]arrow.Field{
		{Name: "auction", Type: arrow.PrimitiveTypes.Int64},
		{Name: "bidder", Type: arrow.PrimitiveTypes.Int64},
		{Name: "price", Type: arrow.PrimitiveTypes.Int64},
		{Name: "channel", Type: arrow.BinaryTypes.String},
		{Name: "url", Type: arrow.BinaryTypes.String},
		{Name: "dateTime", Type: tsType},
		{Name: "extra", Type: arrow.BinaryTypes.String},
	}, nil)
	SideInputSchema = arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.BinaryTypes.String},
	}, nil)
)

// Layout is where a generated data set lives: Dir/<format>/<stream>/ holds
// <stream>-NNNNN.<format> files.
type Layout struct {
	Dir string
}

// StreamDir is the folder of one stream (or SideInput) in one format.
func (l Layout) StreamDir(format, stream string) string {
	return filepath.Join(l.Dir, format, stream)
}

// Stats describes a generated data set.
type Stats struct {
	Persons, Auctions, Bids int64
	Bytes                   int64
	Seconds                 float64
}

// rowGroupRows bounds the rows per row group of the generated Parquet files.
const rowGroupRows = 64 * 1024

// streamWriter buffers one stream's rows of the current file.
type streamWriter struct {
	name    string
	schema  *arrow.Schema
	b       *array.RecordBuilder
	total   int64 // rows of the stream
	written int64 // rows flushed or buffered
	file    int   // index of the file being filled
	files   int
	inFile  int64
	write   func(stream string, file int, schema *arrow.Schema, rec arrow.RecordBatch) error
}

// end is the first row (stream-relative) of file f+1.
func (w *streamWriter) end(f int) int64 { return w.total * int64(f+1) / int64(w.files) }

func (w *streamWriter) flush() error {
	rec := w.b.NewRecordBatch()
	defer rec.Release()
	if err := w.write(w.name, w.file, w.schema, rec); err != nil {
		return err
	}
	w.file++
	w.inFile = 0
	return nil
}

// added accounts for one appended row and flushes the file when it is full.
func (w *streamWriter) added() error {
	w.written++
	w.inFile++
	for w.file < w.files && w.written >= w.end(w.file) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	return nil
}

// Generate writes the data set of c under dir (defaults applied), unless a
// completion marker of an identical earlier call is present. log may be nil.
func Generate(dir string, c Config, log io.Writer) (Layout, Stats, error) {
	c = c.WithDefaults()
	l := Layout{Dir: dir}
	if err := c.Validate(); err != nil {
		return l, Stats{}, fmt.Errorf("nexmark config: %w", err)
	}
	want, err := json.Marshal(c)
	if err != nil {
		return l, Stats{}, fmt.Errorf("nexmark config: %w", err)
	}
	marker := filepath.Join(dir, "nexmark.complete")
	var st Stats
	st.Persons, st.Auctions, st.Bids = Counts(c.Events)
	if got, err := os.ReadFile(marker); err == nil && string(got) == string(want) {
		return l, st, nil
	}
	for _, f := range c.Formats {
		for _, s := range []string{Persons, Auctions, Bids, SideInput} {
			p := l.StreamDir(f, s)
			if err := os.RemoveAll(p); err != nil {
				return l, st, fmt.Errorf("nexmark generate: %w", err)
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				return l, st, fmt.Errorf("nexmark generate: %w", err)
			}
		}
	}
	t0 := time.Now()
	write := func(stream string, file int, schema *arrow.Schema, rec arrow.RecordBatch) error {
		batches := []arrow.RecordBatch{rec}
		for _, f := range c.Formats {
			var data []byte
			var err error
			if f == Parquet {
				data, err = formats.EncodeParquet(schema, batches, formats.EncodeOptions{Compression: "snappy", RowGroupRows: rowGroupRows})
			} else {
				data, err = formats.EncodeJSONL(schema, batches)
			}
			if err != nil {
				return fmt.Errorf("nexmark generate %s file %d (%s): %w", stream, file, f, err)
			}
			p := filepath.Join(l.StreamDir(f, stream), fmt.Sprintf("%s-%05d.%s", stream, file, f))
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return fmt.Errorf("nexmark generate: %w", err)
			}
			st.Bytes += int64(len(data))
		}
		return nil
	}
	mem := memory.DefaultAllocator
	newWriter := func(name string, schema *arrow.Schema, total int64) *streamWriter {
		return &streamWriter{name: name, schema: schema, b: array.NewRecordBuilder(mem, schema), total: total, files: c.Files, write: write}
	}
	pw, aw, bw := newWriter(Persons, PersonSchema, st.Persons), newWriter(Auctions, AuctionSchema, st.Auctions), newWriter(Bids, BidSchema, st.Bids)
	defer pw.b.Release()
	defer aw.b.Release()
	defer bw.b.Release()
	// A stream with fewer rows than files still gets every file (some empty).
	for _, w := range []*streamWriter{pw, aw, bw} {
		for w.file < w.files && w.end(w.file) == 0 {
			if err := w.flush(); err != nil {
				return l, st, err
			}
		}
	}
	g, err := NewGenerator(c)
	if err != nil {
		return l, st, err
	}
	str := func(b *array.RecordBuilder, i int, s string) { b.Field(i).(*array.StringBuilder).Append(s) }
	i64 := func(b *array.RecordBuilder, i int, v int64) { b.Field(i).(*array.Int64Builder).Append(v) }
	tsf := func(b *array.RecordBuilder, i int, v int64) {
		b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(v))
	}
	err = g.Reorder(func(e Event) error {
		switch {
		case e.Person != nil:
			p, b := e.Person, pw.b
			i64(b, 0, p.ID)
			str(b, 1, p.Name)
			str(b, 2, p.EmailAddress)
			str(b, 3, p.CreditCard)
			str(b, 4, p.City)
			str(b, 5, p.State)
			tsf(b, 6, p.DateTime)
			str(b, 7, p.Extra)
			return pw.added()
		case e.Auction != nil:
			a, b := e.Auction, aw.b
			i64(b, 0, a.ID)
			str(b, 1, a.ItemName)
			str(b, 2, a.Description)
			i64(b, 3, a.InitialBid)
			i64(b, 4, a.Reserve)
			tsf(b, 5, a.DateTime)
			tsf(b, 6, a.Expires)
			i64(b, 7, a.Seller)
			i64(b, 8, a.Category)
			str(b, 9, a.Extra)
			return aw.added()
		default:
			x, b := e.Bid, bw.b
			i64(b, 0, x.Auction)
			i64(b, 1, x.Bidder)
			i64(b, 2, x.Price)
			str(b, 3, x.Channel)
			str(b, 4, x.URL)
			tsf(b, 5, x.DateTime)
			str(b, 6, x.Extra)
			return bw.added()
		}
	})
	if err != nil {
		return l, st, err
	}
	// The side input of q13 (Flink's SideInputGenerator: key i, value "i").
	sb := array.NewRecordBuilder(mem, SideInputSchema)
	defer sb.Release()
	for i := range c.SideInputRows {
		i64(sb, 0, int64(i))
		str(sb, 1, strconv.Itoa(i))
	}
	side := sb.NewRecordBatch()
	err = write(SideInput, 0, SideInputSchema, side)
	side.Release()
	if err != nil {
		return l, st, err
	}
	if err := os.WriteFile(marker, want, 0o644); err != nil {
		return l, st, fmt.Errorf("nexmark generate: %w", err)
	}
	st.Seconds = time.Since(t0).Seconds()
	if log != nil {
		fmt.Fprintf(log, "generated %s: %d persons, %d auctions, %d bids, %d files a stream, %d MiB in %.1fs\n",
			dir, st.Persons, st.Auctions, st.Bids, c.Files, st.Bytes>>20, st.Seconds)
	}
	return l, st, nil
}
