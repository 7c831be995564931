package formats

import (
	"io"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

// fastSnappy is the Parquet snappy codec floe writes with. arrow-go's own
// compresses each page with s2.EncodeSnappyBetter, which spends about twice
// the CPU of the standard snappy encoder for a few percent smaller pages;
// writing a window's output was a tenth of a catch-up's CPU, mostly in it.
// s2.EncodeSnappy writes the same snappy block format (any snappy decoder
// reads it, and every reader of floe's older files still works): only the
// encoder's effort differs. Decoding is unchanged.
type fastSnappy struct{}

func (fastSnappy) Encode(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) }

func (fastSnappy) EncodeLevel(dst, src []byte, _ int) []byte { return s2.EncodeSnappy(dst, src) }

func (fastSnappy) Decode(dst, src []byte) []byte {
	dst, err := snappy.Decode(dst, src)
	if err != nil {
		panic(err) // arrow-go's Codec contract; its readers call DecodeWithError
	}
	return dst
}

func (fastSnappy) DecodeWithError(dst, src []byte) ([]byte, error) { return snappy.Decode(dst, src) }

func (fastSnappy) NewReader(r io.Reader) io.ReadCloser { return io.NopCloser(snappy.NewReader(r)) }

func (fastSnappy) CompressBound(n int64) int64 { return int64(s2.MaxEncodedLen(int(n))) }

func (fastSnappy) NewWriter(w io.Writer) io.WriteCloser { return snappy.NewBufferedWriter(w) }

func (s fastSnappy) NewWriterLevel(w io.Writer, _ int) (io.WriteCloser, error) {
	return s.NewWriter(w), nil
}

func init() { compress.RegisterCodec(compress.Codecs.Snappy, fastSnappy{}) }
