package formats

import "github.com/apache/arrow-go/v18/arrow"

// decodeCSV decodes a CSV file: decodeCSVStream (stream_decode.go),
// collecting the batches.
func decodeCSV(file string, data []byte, opts DecodeOptions) (*Decoded, error) {
	return collectBatches(func(each func(arrow.RecordBatch) error) (*Decoded, error) {
		return decodeCSVStream(file, data, opts, each)
	})
}

// collectBatches runs a streaming decode and returns its batches in Decoded (all
// released on an error).
func collectBatches(decode func(each func(arrow.RecordBatch) error) (*Decoded, error)) (*Decoded, error) {
	var batches []arrow.RecordBatch
	d, err := decode(func(b arrow.RecordBatch) error {
		batches = append(batches, b)
		return nil
	})
	if err != nil {
		releaseAll(batches)
		return nil, err
	}
	d.Batches = batches
	return d, nil
}
