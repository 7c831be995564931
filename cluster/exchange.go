package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// The exchange object of one sender in one round (manifest.ExchangePath):
// one object holding a segment for every receiver, read by each receiver
// with ranged GETs: first the header (whose size follows from W), then its
// own segment. Little endian:
//
//	0   magic "FLOEXCH1"
//	8   u32 header length H (through the header checksum)
//	12  u16 version (3), u16 reserved
//	16  u32 sender, u32 workers W, u32 round, u32 meta length M
//	32  u64 generation, u64 epoch
//	48  attempt, 36 bytes (canonical UUID), 4 bytes zero
//	88  W entries of 24 bytes: u64 offset, u64 length, u32 CRC-32C, u32 zero
//	88+24W  meta, M bytes (the sender's summary for all receivers)
//	H-4 u32 CRC-32C of bytes [0, H-4)
//	H   the segments, in receiver order, back to back
//
// The sender's own entry is empty (its rows for itself never leave it).
//
// Version 2 (the layout of version 1) is the engine's protocol in which
// round 1 carries the first keyed stage's rows along with the event times
// (version 1's round 1 carried the event times alone, its rows came in
// round 2): a worker of one release never reads another's objects as
// rows of the wrong stage, it stops at the first round with an error. The
// objects are only read within one epoch attempt.
//
// Version 3 (the same layout) adds, for a window whose rows are combined
// before the exchange (operators.Combiner), one more Arrow IPC stream at
// the end of each segment: the sender's partial aggregates. A worker of
// an earlier release stops at that round naming the version.
const (
	exchangeMagic   = "FLOEXCH1"
	exchangeVersion = 3
	headerFixed     = 88
	entrySize       = 24
	// headerSlack is how much meta (and segment) the first ranged read of
	// a header takes beyond the fixed part and the entries; more meta
	// costs a second read.
	headerSlack = 4096
	// maxMeta bounds the meta a sender may attach.
	maxMeta = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type entry struct {
	offset, length int64
	crc            uint32
}

type header struct {
	length                        int64
	sender, workers, round, metaN int
	generation, epoch             int64
	attempt                       string
	entries                       []entry
	meta                          []byte
}

// encodeExchange builds the exchange object of sender.
func encodeExchange(d *manifest.Decision, round, sender int, segments [][]byte, meta []byte) ([]byte, error) {
	size := 0
	for _, s := range segments {
		size += len(s)
	}
	if len(segments) != d.Workers {
		return nil, fmt.Errorf("exchange round %d: %d segments for %d workers", round, len(segments), d.Workers)
	}
	if len(segments[sender]) != 0 {
		return nil, fmt.Errorf("exchange round %d: worker %d sends itself %d bytes; keep own rows local", round, sender, len(segments[sender]))
	}
	return buildExchange(d, round, sender, meta, size, func(r int, w *bytes.Buffer) error {
		w.Write(segments[r])
		return nil
	})
}

// SegmentWriter appends one receiver's segment to the exchange object
// being built (w holds the object so far: write only at its end; a
// segment may patch bytes it wrote itself, e.g. a length prefix).
type SegmentWriter func(receiver int, w *bytes.Buffer) error

// buildExchange builds the exchange object of sender in one buffer of
// about the header plus size bytes: write appends each other receiver's
// segment in place (the sender's own is empty), then the header is filled
// in.
func buildExchange(d *manifest.Decision, round, sender int, meta []byte, size int, write SegmentWriter) ([]byte, error) {
	w := d.Workers
	if len(meta) > maxMeta {
		return nil, fmt.Errorf("exchange round %d: meta of %d bytes exceeds %d", round, len(meta), maxMeta)
	}
	if len(d.Attempt) != 36 {
		return nil, fmt.Errorf("exchange: attempt %q is not a canonical UUID", d.Attempt)
	}
	h := headerFixed + entrySize*w + len(meta) + 4
	var out bytes.Buffer
	out.Grow(h + max(size, 0))
	out.Write(make([]byte, h))
	ends := make([]int, w)
	for r := range w {
		if r != sender {
			if err := write(r, &out); err != nil {
				return nil, fmt.Errorf("exchange round %d: segment for worker %d: %w", round, r, err)
			}
		}
		ends[r] = out.Len()
	}
	buf := out.Bytes()
	le := binary.LittleEndian
	copy(buf, exchangeMagic)
	le.PutUint32(buf[8:], uint32(h))
	le.PutUint16(buf[12:], exchangeVersion)
	le.PutUint32(buf[16:], uint32(sender))
	le.PutUint32(buf[20:], uint32(w))
	le.PutUint32(buf[24:], uint32(round))
	le.PutUint32(buf[28:], uint32(len(meta)))
	le.PutUint64(buf[32:], uint64(d.Generation))
	le.PutUint64(buf[40:], uint64(d.Epoch))
	copy(buf[48:84], d.Attempt)
	off := h
	for i, end := range ends {
		e := buf[headerFixed+entrySize*i:]
		le.PutUint64(e, uint64(off))
		le.PutUint64(e[8:], uint64(end-off))
		le.PutUint32(e[16:], crc32.Checksum(buf[off:end], castagnoli))
		off = end
	}
	copy(buf[headerFixed+entrySize*w:], meta)
	le.PutUint32(buf[h-4:], crc32.Checksum(buf[:h-4], castagnoli))
	return buf, nil
}

// parseHeader parses and checks the header of an exchange object (b holds
// at least its first headerFixed bytes; more may be needed: then need > 0
// says how many in total).
func parseHeader(b []byte) (h *header, need int64, err error) {
	le := binary.LittleEndian
	if len(b) < headerFixed || string(b[:8]) != exchangeMagic {
		return nil, 0, errors.New("not an exchange object (bad magic or too short)")
	}
	hl := int64(le.Uint32(b[8:]))
	if v := le.Uint16(b[12:]); v != exchangeVersion {
		return nil, 0, fmt.Errorf("exchange format version %d (this release reads %d)", v, exchangeVersion)
	}
	w := int(le.Uint32(b[20:]))
	metaN := int(le.Uint32(b[28:]))
	if w < 1 || w > manifest.MaxWorkers || metaN > maxMeta || hl != int64(headerFixed+entrySize*w+metaN+4) {
		return nil, 0, fmt.Errorf("inconsistent header: length %d, workers %d, meta %d", hl, w, metaN)
	}
	if int64(len(b)) < hl {
		return nil, hl, nil
	}
	if got, want := le.Uint32(b[hl-4:]), crc32.Checksum(b[:hl-4], castagnoli); got != want {
		return nil, 0, fmt.Errorf("header checksum %08x, computed %08x", got, want)
	}
	h = &header{
		length: hl, sender: int(le.Uint32(b[16:])), workers: w, round: int(le.Uint32(b[24:])), metaN: metaN,
		generation: int64(le.Uint64(b[32:])), epoch: int64(le.Uint64(b[40:])), attempt: string(b[48:84]),
	}
	off := hl
	for i := range w {
		e := b[headerFixed+entrySize*i:]
		en := entry{offset: int64(le.Uint64(e)), length: int64(le.Uint64(e[8:])), crc: le.Uint32(e[16:])}
		if en.offset != off || en.length < 0 {
			return nil, 0, fmt.Errorf("segment %d at %d+%d, want offset %d", i, en.offset, en.length, off)
		}
		off += en.length
		h.entries = append(h.entries, en)
	}
	h.meta = append([]byte(nil), b[headerFixed+entrySize*w:hl-4]...)
	return h, 0, nil
}

// headerRead is the length of the first ranged read of a header.
func headerRead(workers int) int64 { return int64(headerFixed + entrySize*workers + 4 + headerSlack) }

// Incoming is what one sender sent this worker in a round.
type Incoming struct {
	Sender int
	// Data is the sender's segment for this worker (nil when empty).
	Data []byte
	// Meta is the sender's summary, the same for every receiver (e.g. the
	// greatest event time per input of its rows, from which every worker
	// computes the same watermark after the round).
	Meta []byte
}

// Send writes this worker's exchange object of round (1, 2, ...):
// segments[r] is for receiver r (segments[self] must be empty), meta goes
// to every receiver. The object is created with create-if-absent: if it
// exists already (an earlier incarnation of this worker wrote it before it
// was killed), the stored one stands, and reused is true. Its rows are
// then the ones every receiver reads; the caller's segments must be what
// it would have sent (the decision fixes the input, so a deterministic
// stage recomputes the same rows), and its own rows stay local either way.
// With one worker there is nothing to exchange and Send writes nothing.
func (e *Epoch) Send(ctx context.Context, round int, segments [][]byte, meta []byte) (reused bool, err error) {
	d, self := e.Decision, e.w.cfg.Worker
	if round < 1 {
		return false, fmt.Errorf("exchange round %d: rounds start at 1", round)
	}
	if d.Workers == 1 {
		return false, nil
	}
	data, err := encodeExchange(d, round, self, segments, meta)
	if err != nil {
		return false, err
	}
	return e.send(ctx, round, data)
}

// SendWith is Send with the segments written in place into the object
// (no copy of each segment into it): write appends receiver r's segment
// for every other worker r; size is the segments' expected total size in
// bytes (a hint: the buffer grows beyond it if needed).
func (e *Epoch) SendWith(ctx context.Context, round int, meta []byte, size int, write SegmentWriter) (reused bool, err error) {
	d, self := e.Decision, e.w.cfg.Worker
	if round < 1 {
		return false, fmt.Errorf("exchange round %d: rounds start at 1", round)
	}
	if d.Workers == 1 {
		return false, nil
	}
	data, err := buildExchange(d, round, self, meta, size, write)
	if err != nil {
		return false, err
	}
	return e.send(ctx, round, data)
}

func (e *Epoch) send(ctx context.Context, round int, data []byte) (reused bool, err error) {
	d, self := e.Decision, e.w.cfg.Worker
	key := manifest.ExchangePath(d.Generation, d.Epoch, d.Attempt, round, self)
	_, err = e.w.cfg.Store.Put(ctx, key, data, store.PutOptions{IfNotExist: true})
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, store.ErrPrecondition) {
		return false, fmt.Errorf("exchange round %d: write %s: %w", round, key, err)
	}
	// Exists: ours from an earlier try or incarnation. Check it is.
	if _, _, err := e.readHeader(ctx, round, self); err != nil {
		return false, err
	}
	return true, nil
}

// readHeader reads sender's header of round (found false: not there yet).
// first holds the bytes of the first read, from offset 0.
func (e *Epoch) readHeader(ctx context.Context, round, sender int) (*header, []byte, error) {
	d := e.Decision
	key := manifest.ExchangePath(d.Generation, d.Epoch, d.Attempt, round, sender)
	first, err := store.ReadRange(ctx, e.w.cfg.Store, key, 0, headerRead(d.Workers))
	if err != nil {
		return nil, nil, err
	}
	h, need, err := parseHeader(first)
	if err == nil && need > 0 {
		rest, rerr := store.ReadRange(ctx, e.w.cfg.Store, key, int64(len(first)), need-int64(len(first)))
		if rerr != nil {
			return nil, nil, fmt.Errorf("exchange %s: read header: %w", key, rerr)
		}
		first = append(first, rest...)
		h, _, err = parseHeader(first)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, key, err)
	}
	if h.sender != sender || h.workers != d.Workers || h.round != round || h.generation != d.Generation || h.epoch != d.Epoch || h.attempt != d.Attempt {
		return nil, nil, fmt.Errorf("%w: %s is sender %d of %d, round %d, gen %d epoch %d attempt %s",
			ErrCorrupt, key, h.sender, h.workers, h.round, h.generation, h.epoch, h.attempt)
	}
	return h, first, nil
}

// Receive waits until every other worker's exchange object of round
// exists (the round's barrier: an object is written whole, so its presence
// means the sender is done with the round) and returns this worker's
// segment of each, in sender order, this worker left out (its own rows are
// local: place them at its index to keep the senders' order). Each sender
// costs a ranged GET of its header and, when the segment is not empty and
// not inside that first read, one of the segment. A barrier without
// progress for Config.Timeout fails with a *MissingError; ErrCommitted
// when the epoch was committed meanwhile.
func (e *Epoch) Receive(ctx context.Context, round int) ([]Incoming, error) {
	d, self := e.Decision, e.w.cfg.Worker
	if d.Workers == 1 {
		return nil, nil
	}
	var pending []int
	for s := range d.Workers {
		if s != self {
			pending = append(pending, s)
		}
	}
	got := make([]Incoming, d.Workers)
	probe := func(ctx context.Context, s int) (bool, error) {
		h, first, err := e.readHeader(ctx, round, s)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		en := h.entries[self]
		in := Incoming{Sender: s, Meta: h.meta}
		switch {
		case en.length == 0:
		case en.offset+en.length <= int64(len(first)):
			in.Data = first[en.offset : en.offset+en.length]
		default:
			key := manifest.ExchangePath(d.Generation, d.Epoch, d.Attempt, round, s)
			if in.Data, err = store.ReadRange(ctx, e.w.cfg.Store, key, en.offset, en.length); err != nil {
				return false, fmt.Errorf("exchange %s: read segment %d: %w", key, self, err)
			}
		}
		if int64(len(in.Data)) != en.length || crc32.Checksum(in.Data, castagnoli) != en.crc {
			return false, fmt.Errorf("%w: %s: segment %d: %d bytes, CRC mismatch or short read (want %d)",
				ErrCorrupt, manifest.ExchangePath(d.Generation, d.Epoch, d.Attempt, round, s), self, len(in.Data), en.length)
		}
		got[s] = in
		return true, nil
	}
	if err := e.w.await(ctx, fmt.Sprintf("exchange round %d", round), d.Generation, d.Epoch, pending, probe, e.Committed); err != nil {
		return nil, err
	}
	out := make([]Incoming, 0, d.Workers-1)
	for s, in := range got {
		if s != self {
			out = append(out, in)
		}
	}
	return out, nil
}

// Committed reports whether the epoch's manifest exists (one GET).
func (e *Epoch) Committed(ctx context.Context) (bool, error) {
	d := e.Decision
	_, err := store.ReadRange(ctx, e.w.cfg.Store, manifest.ManifestPath(d.Generation, d.Epoch), 0, 1)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("gen %d epoch %d: check manifest: %w", d.Generation, d.Epoch, err)
}
