package imports

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"testing"
	"time"
)

// chartBound is the state bound the chart derives with its defaults (--max-state-size):
// half of the 512Mi memory limit for states, each held up to twice, by 10 reconciles
// and 5 runs at once.
const chartBound = 512 << 20 / 2 / 2 / (10 + 5)

// peakHeap runs f and returns how much the heap's objects grew at most above what they
// were before, sampled while f runs with the collector running as often as it may, so
// that they are about those still in use; and the bytes f allocated.
func peakHeap(f func()) (peak, allocated uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	heap := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	base := heap()
	ctx, stop := context.WithCancel(context.Background())
	peaks := make(chan uint64)
	go func() {
		highest := base
		for ctx.Err() == nil {
			highest = max(highest, heap())
			time.Sleep(50 * time.Microsecond)
		}
		peaks <- max(highest, heap())
	}()
	f()
	stop()
	highest := <-peaks
	runtime.ReadMemStats(&after)
	return highest - base, after.TotalAlloc - before.TotalAlloc
}

// BenchmarkIndexWorstCaseState indexes and lists the addresses of the worst-case states
// at the chart's bound, reporting the bytes allocated for each byte of the state and the
// heap's peak above the state it holds, for each byte of the state.
func BenchmarkIndexWorstCaseState(b *testing.B) {
	ids, err := ParseIDs(worstCaseIDs)
	if err != nil {
		b.Fatal(err)
	}
	states := worstCaseStatesOf(chartBound)
	for _, name := range slices.Sorted(mapsKeys(states)) {
		state := states[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(state)))
			var peak, allocated uint64
			for b.Loop() {
				p, a := peakHeap(func() {
					index, err := ids.Index(state)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := Addresses(state); err != nil {
						b.Fatal(err)
					}
					runtime.KeepAlive(index)
				})
				peak, allocated = max(peak, p), allocated+a
			}
			b.ReportMetric(float64(allocated)/float64(b.N)/float64(len(state)), "alloc-B/state-B")
			b.ReportMetric(float64(peak)/float64(len(state)), "peak-heap-B/state-B")
			b.ReportMetric(float64(peak), "peak-heap-B")
		})
	}
}
