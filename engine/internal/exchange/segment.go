package exchange

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Encode encodes one receiver's rows of a keyed stage: per input,
// a u64 length and an Arrow IPC stream (nothing for an input without
// rows); nothing at all when no input has rows.
func Encode(schemas []*arrow.Schema, perInput [][]arrow.RecordBatch) ([]byte, error) {
	var out bytes.Buffer
	if err := Append(&out, schemas, perInput); err != nil {
		return nil, err
	}
	if out.Len() == 0 {
		return nil, nil
	}
	return out.Bytes(), nil
}

// Append is Encode appending to out, in place.
func Append(out *bytes.Buffer, schemas []*arrow.Schema, perInput [][]arrow.RecordBatch) error {
	if !anyRows(perInput) {
		return nil
	}
	var zero [8]byte
	for i, bs := range perInput {
		at := out.Len()
		out.Write(zero[:])
		if rowsIn(bs) > 0 {
			sc := schemas[i]
			wr := ipc.NewWriter(out, ipc.WithSchema(sc))
			for _, b := range bs {
				b, err := Conform(b, sc)
				if err != nil {
					return err
				}
				err = wr.Write(b)
				b.Release()
				if err != nil {
					return err
				}
			}
			if err := wr.Close(); err != nil {
				return err
			}
		}
		binary.LittleEndian.PutUint64(out.Bytes()[at:], uint64(out.Len()-at-8))
	}
	return nil
}

// Conform returns b (retained) labelled with the plan's schema sc
// when the two differ only in nullability or metadata: decoders mark every
// column nullable, while a schema inferred from a Parquet file's required
// columns is not, and an IPC stream carries one schema.
func Conform(b arrow.RecordBatch, sc *arrow.Schema) (arrow.RecordBatch, error) {
	if b.Schema().Equal(sc) {
		b.Retain()
		return b, nil
	}
	if int(b.NumCols()) != sc.NumFields() {
		return nil, fmt.Errorf("rows of %d columns, the plan's schema has %d: %s", b.NumCols(), sc.NumFields(), sc)
	}
	for i, f := range sc.Fields() {
		if g := b.Schema().Field(i); g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			return nil, fmt.Errorf("column %d is %s %s, the plan's %s %s", i, g.Name, g.Type, f.Name, f.Type)
		}
	}
	return array.NewRecordBatch(sc, b.Columns(), b.NumRows()), nil
}

// Decode is Encode's inverse.
func Decode(schemas []*arrow.Schema, data []byte) ([][]arrow.RecordBatch, error) {
	out := make([][]arrow.RecordBatch, len(schemas))
	if len(data) == 0 {
		return out, nil
	}
	for i := range schemas {
		if len(data) < 8 {
			return nil, fmt.Errorf("segment truncated before input %d", i)
		}
		n := binary.LittleEndian.Uint64(data)
		data = data[8:]
		if n > uint64(len(data)) {
			return nil, fmt.Errorf("segment input %d: %d bytes announced, %d left", i, n, len(data))
		}
		part := data[:n]
		data = data[n:]
		if n == 0 {
			continue
		}
		rd, err := ipc.NewReaderFromMessageReader(newBytesMessages(part))
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		if !rd.Schema().Equal(schemas[i]) {
			rd.Release()
			return nil, fmt.Errorf("input %d: schema %s, the plan's %s", i, rd.Schema(), schemas[i])
		}
		for rd.Next() {
			b := rd.RecordBatch()
			b.Retain()
			out[i] = append(out[i], b)
		}
		err = rd.Err()
		rd.Release()
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("%d bytes after the last input", len(data))
	}
	return out, nil
}

// bytesMessages reads the messages of an Arrow IPC stream held in memory
// without copying their bodies: the batches read from it slice the
// stream's bytes (ipc.NewReader would copy every body into new buffers).
type bytesMessages struct {
	data []byte
	refs atomic.Int64
	msg  *ipc.Message
}

func newBytesMessages(data []byte) *bytesMessages {
	if len(data) > 0 && uintptr(unsafe.Pointer(&data[0]))%8 != 0 {
		// Arrow buffers are 8-byte aligned within the stream: keep them
		// aligned in memory too.
		data = append(make([]byte, 0, len(data)), data...)
	}
	m := &bytesMessages{data: data}
	m.refs.Add(1)
	return m
}

// Message returns the next message (io.EOF at the end of the stream).
func (m *bytesMessages) Message() (msg *ipc.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			msg, err = nil, fmt.Errorf("arrow/ipc: invalid message: %v", p)
		}
	}()
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
	if len(m.data) < 4 {
		return nil, io.EOF
	}
	le := binary.LittleEndian
	n := int64(le.Uint32(m.data))
	off := int64(4)
	if n == 0xFFFFFFFF { // the continuation marker, then the length
		if len(m.data) < 8 {
			return nil, errors.New("arrow/ipc: stream truncated in a message length")
		}
		n, off = int64(int32(le.Uint32(m.data[4:]))), 8
	}
	if n == 0 {
		return nil, io.EOF // end of stream
	}
	if n < 4 || off+n > int64(len(m.data)) {
		return nil, fmt.Errorf("arrow/ipc: message metadata of %d bytes, %d left", n, int64(len(m.data))-off)
	}
	meta := memory.NewBufferBytes(m.data[off : off+n])
	head := ipc.NewMessage(meta, memory.NewBufferBytes(nil))
	bodyLen := head.BodyLen()
	head.Release()
	rest := m.data[off+n:]
	if bodyLen < 0 || bodyLen > int64(len(rest)) {
		return nil, fmt.Errorf("arrow/ipc: message body of %d bytes, %d left", bodyLen, len(rest))
	}
	m.msg = ipc.NewMessage(meta, memory.NewBufferBytes(rest[:bodyLen]))
	m.data = rest[bodyLen:]
	return m.msg, nil
}

func (m *bytesMessages) Retain() { m.refs.Add(1) }

func (m *bytesMessages) Release() {
	if m.refs.Add(-1) == 0 && m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}

func rowsIn(bs []arrow.RecordBatch) int64 {
	var n int64
	for _, b := range bs {
		n += b.NumRows()
	}
	return n
}

func anyRows(perInput [][]arrow.RecordBatch) bool {
	for _, bs := range perInput {
		if rowsIn(bs) > 0 {
			return true
		}
	}
	return false
}
