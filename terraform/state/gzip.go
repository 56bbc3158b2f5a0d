package state

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"sync"
)

// gzipWriters pool compressors by level (gzip.HuffmanOnly to gzip.BestCompression).
var gzipWriters [gzip.BestCompression - gzip.HuffmanOnly + 1]sync.Pool

// Gzip compresses data at level, one of compress/gzip's, with a compressor taken from a
// pool: one allocates up to a megabyte of tables, which a seed's runs and reconciles would
// otherwise allocate anew for every state and index they compress. The output is what a
// new gzip.Writer at level writes.
func Gzip(data []byte, level int) ([]byte, error) {
	if level < gzip.HuffmanOnly || level > gzip.BestCompression {
		return nil, fmt.Errorf("gzip: invalid compression level: %d", level)
	}
	var buf bytes.Buffer
	pool := &gzipWriters[level-gzip.HuffmanOnly]
	zw, ok := pool.Get().(*gzip.Writer)
	if ok {
		zw.Reset(&buf)
	} else {
		var err error
		if zw, err = gzip.NewWriterLevel(&buf, level); err != nil {
			return nil, err
		}
	}
	defer pool.Put(zw)
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
