package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"gocloud.dev/blob"
)

// bucketStore is a Store over a gocloud bucket: S3 (the server enforces
// conditional writes and computes ETags) or memblob (mem is true: a mutex
// serialises writes and the ETag is a content hash).
type bucketStore struct {
	bucket *blob.Bucket
	mem    bool
	mu     sync.Mutex // mem only: serialises every write and delete

	// S3 only: the client, bucket name and key prefix ("" or ending in
	// "/") under the gocloud bucket, for requests gocloud makes costlier
	// than needed (Delete).
	s3       *s3.Client
	s3Bucket string
	s3Prefix string

	// reqs counts requests: for S3 the HTTP client's countingTransport
	// counts each one sent; for mem each Store call counts one.
	reqs *reqCounter
}

var _ RequestCounter = (*bucketStore)(nil)

// Requests implements RequestCounter.
func (b *bucketStore) Requests() Requests { return b.reqs.Requests() }

// countMem counts one request of a mem:// store (S3's are counted by the
// HTTP client).
func (b *bucketStore) countMem(op Op) {
	if b.mem {
		b.reqs.count(op)
	}
}

var _ Store = (*bucketStore)(nil)

// smallObject bounds the objects whose ETag is a cryptographic hash.
const smallObject = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// contentETag is the ETag of file:// and mem:// objects, a function of the
// content only, so it changes whenever the content does. Objects up to 1 MiB
// (every object floe compare-and-swaps: _latest.json) get 128 bits of
// SHA-256; larger ones (input files, read far more often than written) get
// size + CRC-32C + CRC-32 (IEEE), both hardware-accelerated, so reading a
// large input file does not pay a SHA-256 pass.
func contentETag(data []byte) string {
	if len(data) <= smallObject {
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:16])
	}
	return fmt.Sprintf("l%x-%08x-%08x", len(data), crc32.Checksum(data, castagnoli), crc32.ChecksumIEEE(data))
}

// wrap is wrapErr, except that an S3 request that failed because of how
// the store is set up reads as what to change, naming the bucket.
func (b *bucketStore) wrap(op, key string, err error) error {
	if b.s3 != nil {
		if se := s3Setup(b.s3Bucket, err); se != nil {
			return fmt.Errorf("store: %s %q: %w", op, key, se)
		}
	}
	return wrapErr(op, key, err)
}

// Get implements Store.
func (b *bucketStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := checkKey(key); err != nil {
		return nil, "", fmt.Errorf("store: get: %w", err)
	}
	b.countMem(OpGet)
	data, etag, err := b.get(ctx, key)
	if err != nil {
		return nil, "", b.wrap("get", key, err)
	}
	return data, etag, nil
}

var _ Reader = (*bucketStore)(nil)

// Read implements Reader: Get without the ETag (mem:// does not hash the
// content; S3 does not require the response to carry one).
func (b *bucketStore) Read(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("store: get: %w", err)
	}
	b.countMem(OpGet)
	data, err := b.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, b.wrap("get", key, err)
	}
	return data, nil
}

func (b *bucketStore) get(ctx context.Context, key string) ([]byte, string, error) {
	r, err := b.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	var buf bytes.Buffer
	if n := r.Size(); n > 0 {
		buf.Grow(int(n))
	}
	if _, err := io.Copy(&buf, r); err != nil {
		return nil, "", err
	}
	data := buf.Bytes()
	if b.mem {
		return data, contentETag(data), nil
	}
	var out s3.GetObjectOutput
	if !r.As(&out) || aws.ToString(out.ETag) == "" {
		return nil, "", errors.New("s3 GetObject response has no ETag")
	}
	return data, aws.ToString(out.ETag), nil
}

// Put implements Store.
func (b *bucketStore) Put(ctx context.Context, key string, data []byte, opts PutOptions) (string, error) {
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("store: put: %w", err)
	}
	if err := checkPutOptions(opts); err != nil {
		return "", fmt.Errorf("store: put %q: %w", key, err)
	}
	b.countMem(OpPut)
	var (
		etag string
		err  error
	)
	if b.mem {
		etag, err = b.putMem(ctx, key, data, opts)
	} else {
		etag, err = b.putS3(ctx, key, data, opts)
	}
	if err != nil {
		if opts.IfMatch != "" && errors.Is(classifyWrap(err), ErrNotFound) {
			// If-Match on an absent object: the condition failed.
			return "", fmt.Errorf("store: put %q: if-match on absent object: %w: %w", key, ErrPrecondition, err)
		}
		return "", b.wrap("put", key, err)
	}
	return etag, nil
}

// classifyWrap returns err wrapped so errors.Is sees its sentinel.
func classifyWrap(err error) error {
	if s := classify(err); s != nil {
		return fmt.Errorf("%w: %w", s, err)
	}
	return err
}

func (b *bucketStore) putMem(ctx context.Context, key string, data []byte, opts PutOptions) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case opts.IfMatch != "":
		cur, err := b.bucket.ReadAll(ctx, key)
		if err != nil {
			return "", err
		}
		if got := contentETag(cur); got != opts.IfMatch {
			return "", fmt.Errorf("if-match %s: current etag is %s: %w", opts.IfMatch, got, ErrPrecondition)
		}
	case opts.IfNotExist:
		ok, err := b.bucket.Exists(ctx, key)
		if err != nil {
			return "", err
		}
		if ok {
			return "", fmt.Errorf("if-not-exist: object exists: %w", ErrPrecondition)
		}
	}
	err := b.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return "", err
	}
	return contentETag(data), nil
}

// putS3 writes through gocloud's S3 writer. If-None-Match comes from
// WriterOptions.IfNotExist, If-Match is set on the transfer manager's
// UploadObjectInput in BeforeWrite. The new ETag is read from the
// PutObject/CompleteMultipartUpload response by the addETagCapture middleware
// (no extra request). Objects of 16 MiB and more go multipart; their
// conditions travel on CompleteMultipartUpload.
func (b *bucketStore) putS3(ctx context.Context, key string, data []byte, opts PutOptions) (string, error) {
	slot := new(etagSlot)
	ctx = context.WithValue(ctx, etagSlotKey{}, slot)
	wo := &blob.WriterOptions{
		ContentType: "application/octet-stream",
		IfNotExist:  opts.IfNotExist,
	}
	if opts.IfMatch != "" {
		wo.BeforeWrite = func(as func(any) bool) error {
			var in *transfermanager.UploadObjectInput
			if !as(&in) || in == nil {
				return errors.New("cannot set If-Match: writer does not expose UploadObjectInput")
			}
			in.IfMatch = aws.String(opts.IfMatch)
			return nil
		}
	}
	if err := b.bucket.WriteAll(ctx, key, data, wo); err != nil {
		return "", err
	}
	slot.mu.Lock()
	etag := slot.etag
	slot.mu.Unlock()
	if etag == "" {
		return "", errors.New("s3 write response carried no ETag")
	}
	return etag, nil
}

// etagSlot receives the ETag of a write response. It travels in the context
// of the request.
type etagSlot struct {
	mu   sync.Mutex
	etag string
}

type etagSlotKey struct{}

// addETagCapture is an AWS SDK API option: after a PutObject or
// CompleteMultipartUpload whose context carries an *etagSlot, it stores the
// response's ETag there.
func addETagCapture(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("floeCaptureETag",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			slot, ok := ctx.Value(etagSlotKey{}).(*etagSlot)
			if err != nil || !ok {
				return out, md, err
			}
			var etag *string
			switch r := out.Result.(type) {
			case *s3.PutObjectOutput:
				etag = r.ETag
			case *s3.CompleteMultipartUploadOutput:
				etag = r.ETag
			default:
				return out, md, err
			}
			slot.mu.Lock()
			slot.etag = aws.ToString(etag)
			slot.mu.Unlock()
			return out, md, err
		}), middleware.Before)
}

// List implements Store.
func (b *bucketStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return b.ListAfter(ctx, prefix, "")
}

var _ ListerAfter = (*bucketStore)(nil)

// ListAfter implements ListerAfter. On S3 it sends StartAfter (the key
// with the store's prefix), so the server skips what sorts before it; a key
// gocloud would escape (see s3KeyVerbatim) is listed whole and filtered.
func (b *bucketStore) ListAfter(ctx context.Context, prefix, after string) ([]ObjectInfo, error) {
	b.countMem(OpList)
	var out []ObjectInfo
	opts := &blob.ListOptions{Prefix: prefix}
	if start := b.s3Prefix + after; after != "" && b.s3 != nil && s3KeyVerbatim(start) {
		opts.BeforeList = func(as func(any) bool) error {
			var in *s3.ListObjectsV2Input
			if !as(&in) || in == nil {
				return errors.New("cannot set StartAfter: lister does not expose ListObjectsV2Input")
			}
			if in.ContinuationToken == nil {
				in.StartAfter = aws.String(start)
			}
			return nil
		}
	}
	it := b.bucket.List(opts)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, b.wrap("list", prefix, err)
		}
		if obj.IsDir || obj.Key <= after {
			continue
		}
		out = append(out, ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store.
func (b *bucketStore) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("store: delete: %w", err)
	}
	if b.mem {
		b.reqs.count(OpDelete)
		b.mu.Lock()
		defer b.mu.Unlock()
	}
	var err error
	if full := b.s3Prefix + key; b.s3 != nil && s3KeyVerbatim(full) {
		// One DeleteObject. gocloud's Delete sends a HeadObject first to
		// report NotFound, which S3's DeleteObject does not: a missing key
		// is success here anyway.
		_, err = b.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.s3Bucket), Key: aws.String(full)})
	} else {
		err = b.bucket.Delete(ctx, key)
	}
	if err != nil && errors.Is(classifyWrap(err), ErrNotFound) {
		return nil
	}
	return b.wrap("delete", key, err)
}

// Close implements Store.
func (b *bucketStore) Close() error {
	if err := b.bucket.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// s3KeyVerbatim reports whether gocloud's s3blob stores key unescaped: it
// hex-escapes control characters, the "/" of "../" and anything that looks
// like its own escape sequence ("__0x"). Only such keys may bypass gocloud.
func s3KeyVerbatim(key string) bool {
	for _, r := range key {
		if r < 32 {
			return false
		}
	}
	return !strings.Contains(key, "../") && !strings.Contains(key, "__0x")
}
