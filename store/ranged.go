package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aws/smithy-go"
)

// RangeReader is an optional interface for reading part of an object in one
// request (S3: a GetObject with a Range header, billed as one GET). Every
// store of this package and its wrappers implement it. Use the ReadRange
// function rather than asserting it.
type RangeReader interface {
	// ReadRange returns the bytes [offset, offset+length) of the object, or
	// fewer when the object ends first (none when offset is at or past its
	// end), or ErrNotFound. offset must be >= 0 and length > 0.
	ReadRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
}

// ReadRange returns the bytes [offset, offset+length) of the object under
// key, fewer when the object ends first, or ErrNotFound. A store without
// RangeReader reads the whole object and slices it (same result, full
// cost).
func ReadRange(ctx context.Context, s Store, key string, offset, length int64) ([]byte, error) {
	if err := checkRange(offset, length); err != nil {
		return nil, fmt.Errorf("store: read range %q: %w", key, err)
	}
	if r, ok := s.(RangeReader); ok {
		return r.ReadRange(ctx, key, offset, length)
	}
	data, err := Read(ctx, s, key)
	if err != nil {
		return nil, err
	}
	return sliceRange(data, offset, length), nil
}

func checkRange(offset, length int64) error {
	if offset < 0 || length <= 0 {
		return fmt.Errorf("invalid range: offset %d, length %d (want offset >= 0, length > 0)", offset, length)
	}
	return nil
}

// sliceRange returns data[offset:offset+length] clipped to data.
func sliceRange(data []byte, offset, length int64) []byte {
	n := int64(len(data))
	if offset >= n {
		return []byte{}
	}
	end := n
	if length < n-offset {
		end = offset + length
	}
	return data[offset:end]
}

var (
	_ RangeReader = (*fileStore)(nil)
	_ RangeReader = (*bucketStore)(nil)
	_ RangeReader = (*Retrying)(nil)
	_ RangeReader = (*Faulty)(nil)
)

// ReadRange implements RangeReader: a positioned read of the file, one
// request counted.
func (s *fileStore) ReadRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	s.reqs.count(OpGet)
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("store: read range: %w", err)
	}
	if err := checkRange(offset, length); err != nil {
		return nil, fmt.Errorf("store: read range %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrapErr("get", key, err)
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		if isAbsent(err) {
			return nil, fmt.Errorf("store: get %q: %w", key, ErrNotFound)
		}
		return nil, wrapErr("get", key, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, wrapErr("get", key, err)
	}
	if info.IsDir() {
		return nil, fmt.Errorf("store: get %q: %w", key, ErrNotFound)
	}
	size := info.Size()
	if offset >= size {
		return []byte{}, nil
	}
	n := min(length, size-offset)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, offset); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, wrapErr("get", key, err)
	}
	return buf, nil
}

// ReadRange implements RangeReader: on S3 one GetObject with a Range header
// (a range starting at or past the end is answered 416 InvalidRange, read
// as no bytes); on mem:// a slice of the object.
func (b *bucketStore) ReadRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("store: read range: %w", err)
	}
	if err := checkRange(offset, length); err != nil {
		return nil, fmt.Errorf("store: read range %q: %w", key, err)
	}
	b.countMem(OpGet)
	if b.mem {
		data, err := b.bucket.ReadAll(ctx, key)
		if err != nil {
			return nil, b.wrap("get", key, err)
		}
		return sliceRange(data, offset, length), nil
	}
	r, err := b.bucket.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange" {
			// Past the end; an absent key is NoSuchKey, not this.
			return []byte{}, nil
		}
		return nil, b.wrap("get", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, b.wrap("get", key, err)
	}
	if int64(len(data)) > length {
		data = data[:length] // a server that ignored the Range header
	}
	return data, nil
}

// ReadRange implements RangeReader, with retries (a get).
func (r *Retrying) ReadRange(ctx context.Context, key string, offset, length int64) (data []byte, err error) {
	err = r.do(ctx, OpGet, key, false, func(ctx context.Context) error {
		data, err = ReadRange(ctx, r.inner, key, offset, length)
		return err
	})
	return data, err
}

// ReadRange implements RangeReader; it counts as a Get.
func (f *Faulty) ReadRange(ctx context.Context, key string, offset, length int64) (data []byte, err error) {
	err = f.call(ctx, OpGet, key, func() error {
		data, err = ReadRange(ctx, f.inner, key, offset, length)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// RequestBytes is what one request costs a store, in bytes it could
// transfer in the same time: a caller choosing between one whole read and
// several ranged ones (a Parquet file's needed column chunks) weighs each
// extra request as this many bytes. The stores of this package and their
// wrappers report it: DefaultRequestBytes for object stores (a GET's
// first byte takes about as long as a megabyte's transfer), LocalRequestBytes
// for file:// (a pread costs microseconds). A store that does not report
// it is taken as an object store.
func RequestBytes(s Store) int64 {
	if c, ok := s.(interface{ requestBytes() int64 }); ok {
		return c.requestBytes()
	}
	return DefaultRequestBytes
}

// The costs RequestBytes reports.
const (
	DefaultRequestBytes = 1 << 20
	LocalRequestBytes   = 64 << 10
)

func (s *fileStore) requestBytes() int64   { return LocalRequestBytes }
func (b *bucketStore) requestBytes() int64 { return DefaultRequestBytes }
func (r *Retrying) requestBytes() int64    { return RequestBytes(r.inner) }
func (f *Faulty) requestBytes() int64      { return RequestBytes(f.inner) }
