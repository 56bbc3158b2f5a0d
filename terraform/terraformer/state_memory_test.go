package terraformer

import (
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// Whether a state holds resources is read without keeping any of them: a state of a
// mebibyte of empty resources costs a fraction of its size, and says it holds some.
func TestWhetherAStateHoldsResourcesIsReadWithinItsSize(t *testing.T) {
	g := NewWithT(t)
	state := []byte(`{"version":4,"resources":[` + strings.Repeat(`{},`, 1<<20/3) + `{}]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	holds := holdsResources(state)
	runtime.ReadMemStats(&after)
	g.Expect(holds).To(BeTrue())
	g.Expect(after.TotalAlloc - before.TotalAlloc).To(BeNumerically("<", len(state)/4))
	for state, holds := range map[string]bool{
		``: false, `{}`: false, `{"resources":[]}`: false, `{"resources":null}`: false, `{"resources":[1]}`: true,
		`{"resources":[{"mode":"managed"}]}`: true, `{"resources":{}}`: false, `{"resources":[{}]`: false,
	} {
		g.Expect(holdsResources([]byte(state))).To(Equal(holds), state)
	}
}
