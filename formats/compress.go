package formats

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// MaxDecompressedSize bounds what one compressed input file may expand to
// (a guard against a decompression bomb filling memory): a larger file is
// rejected as a whole.
const MaxDecompressedSize = 4 << 30

// Compression names a whole-file compression of an input file.
type Compression string

// Compressions Decode recognises.
const (
	Uncompressed Compression = ""
	Gzip         Compression = "gzip"
	Zstd         Compression = "zstd"
)

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// DetectCompression says how data is compressed, by its magic bytes (the
// content decides, not the name). A file named *.gz or *.zst whose bytes do
// not start with that format's magic is an error: it was cut or mislabelled.
func DetectCompression(file string, data []byte) (Compression, error) {
	switch {
	case bytes.HasPrefix(data, gzipMagic):
		return Gzip, nil
	case bytes.HasPrefix(data, zstdMagic):
		return Zstd, nil
	}
	lower := strings.ToLower(file)
	switch {
	case strings.HasSuffix(lower, ".gz") || strings.HasSuffix(lower, ".gzip"):
		return "", fmt.Errorf("%s: named like a gzip file but does not start with the gzip magic bytes", file)
	case strings.HasSuffix(lower, ".zst") || strings.HasSuffix(lower, ".zstd"):
		return "", fmt.Errorf("%s: named like a zstd file but does not start with the zstd magic bytes", file)
	}
	return Uncompressed, nil
}

// decompress returns data decoded when it is gzip or zstd (see
// DetectCompression), else data itself.
func decompress(file string, data []byte) ([]byte, error) {
	c, err := DetectCompression(file, data)
	if err != nil || c == Uncompressed {
		return data, err
	}
	var r io.Reader
	switch c {
	case Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", file, err)
		}
		defer zr.Close()
		r = zr
	case Zstd:
		zr, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDecompressedSize))
		if err != nil {
			return nil, fmt.Errorf("%s: zstd: %w", file, err)
		}
		defer zr.Close()
		r = zr
	}
	var out bytes.Buffer
	out.Grow(min(4*len(data), MaxDecompressedSize))
	n, err := io.Copy(&out, io.LimitReader(r, MaxDecompressedSize+1))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%s: %s: the file is truncated", file, c)
		}
		return nil, fmt.Errorf("%s: %s: %w", file, c, err)
	}
	if n > MaxDecompressedSize {
		return nil, fmt.Errorf("%s: %s: decompresses to more than %d bytes", file, c, int64(MaxDecompressedSize))
	}
	return out.Bytes(), nil
}
