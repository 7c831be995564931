// Package sources holds what a pipeline's sources are, apart from running
// an epoch: how they are listed (List, ListAfter, the ordered Listing with
// its frontier, forget_after), the combined store of a graph's named
// sources (Mux), schema inference from Parquet footers, decode options, the
// per-source row limit of an epoch (RowCaps), ranged reads and the kafka
// source's opening.
//
// A graph pipeline reads several named sources. The runner keeps one
// listing, one processed-file set and one watermark progress map: the
// sources are combined into one store whose keys are "<source>/<key>"
// (Mux), and each source is one watermark input, so every source has its
// own watermark progress and idle timeout, and the pipeline's watermark is
// the minimum over the sources. A file's source is the first segment of its
// combined key (spec.Pipeline.SourceOfKey); it is decoded with that
// source's format, schema and event time, and that source's own settings
// apply to it: max_files_per_epoch (package decide), max_rows_per_epoch
// (RowCaps), max_rejected_fraction, capture and on_error (the runner).
// Nothing merges the sources' settings. A linear pipeline's one source
// keeps its keys unprefixed.
package sources
