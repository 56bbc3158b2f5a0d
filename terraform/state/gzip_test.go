package state

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"runtime"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// A pooled compressor writes what a new one writes, also reused, at another level than
// its last and from many goroutines at once; what it writes expands to the input.
func TestGzipWritesWhatANewWriterWrites(t *testing.T) {
	g := NewWithT(t)
	fresh := func(data []byte, level int) []byte {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, level)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = zw.Write(data)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(zw.Close()).To(Succeed())
		return buf.Bytes()
	}
	states := [][]byte{nil, []byte(`{"version":4}`), bytes.Repeat([]byte(`{"type":"kubectl_manifest","name":"zone"},`), 5000)}
	type outcome struct {
		name               string
		compressed, wanted []byte
		err                error
	}
	var outcomes []*outcome
	var wg sync.WaitGroup
	for round := range 4 {
		for _, level := range []int{gzip.BestSpeed, gzip.DefaultCompression, gzip.BestCompression} {
			for i, state := range states {
				o := &outcome{name: fmt.Sprintf("round %d, level %d, state %d", round, level, i), wanted: fresh(state, level)}
				outcomes = append(outcomes, o)
				wg.Add(1)
				go func() {
					defer wg.Done()
					o.compressed, o.err = Gzip(state, level)
				}()
			}
		}
	}
	wg.Wait()
	for _, o := range outcomes {
		g.Expect(o.err).NotTo(HaveOccurred(), o.name)
		g.Expect(o.compressed).To(Equal(o.wanted), o.name)
		_, err := Gunzip(bytes.NewReader(o.compressed))
		g.Expect(err).NotTo(HaveOccurred(), o.name)
	}
	_, err := Gzip([]byte("x"), 10)
	g.Expect(err).To(MatchError(ContainSubstring("invalid compression level: 10")))
}

// Gzip takes its compressors from the pool rather than making them anew: a new one
// allocates up to a megabyte of tables, for states of a few kilobytes. (The race detector
// has a pool drop some of what it is given, so the bound is half of what new ones take.)
func TestGzipReusesItsCompressors(t *testing.T) {
	g := NewWithT(t)
	state := bytes.Repeat([]byte(`{"type":"kubectl_manifest","name":"zone"},`), 100)
	const calls = 50
	allocatedPerCall := func(compress func() error) uint64 {
		g.Expect(compress()).To(Succeed())
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range calls {
			g.Expect(compress()).To(Succeed())
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / calls
	}
	pooled := allocatedPerCall(func() error {
		_, err := Gzip(state, gzip.BestCompression)
		return err
	})
	fresh := allocatedPerCall(func() error {
		zw, err := gzip.NewWriterLevel(&bytes.Buffer{}, gzip.BestCompression)
		if err != nil {
			return err
		}
		if _, err := zw.Write(state); err != nil {
			return err
		}
		return zw.Close()
	})
	g.Expect(pooled).To(BeNumerically("<", fresh/2), "bytes allocated per compression, pooled against new compressors")
}
