package imports

import (
	"fmt"
	"iter"
	"maps"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// stateSize is the size of the worst-case states: a state of this size may be indexed
// with at most maxAllocatedPerByte bytes allocated for each of its bytes.
const (
	stateSize           = 1 << 20
	maxAllocatedPerByte = 8
)

// worstCaseIDs are import IDs as a provider declares them: a plain attribute, and one
// that branches on and ranges over attributes.
var worstCaseIDs = map[string]string{
	"aws_vpc":                 "{{.id}}",
	"aws_security_group_rule": "{{.security_group_id}}_{{.type}}{{if .self}}_self{{end}}{{with .source_security_group_id}}_{{.}}{{end}}{{range .cidr_blocks}}_{{.}}{{end}}",
}

// repeated is a state whose resources are filled with copies of unit until it is size
// bytes long: head and tail enclose the copies, separated by commas.
func repeated(head, unit, tail string, size int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":4,"serial":3,"lineage":"l","resources":[`)
	b.WriteString(head)
	for i := 0; b.Len()+len(unit)+len(tail)+3 < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strings.ReplaceAll(unit, "%d", fmt.Sprint(i)))
	}
	b.WriteString(tail)
	b.WriteString(`]}`)
	return []byte(b.String())
}

const sgRule = `{"mode":"managed","type":"aws_security_group_rule","name":"r","instances":[{"attributes":{"security_group_id":"sg","type":"ingress","self":false,"source_security_group_id":null,"cidr_blocks":`

// worstCaseStates are states of about stateSize bytes, each the most a reader of some
// part of a state may expand.
func worstCaseStates() map[string][]byte { return worstCaseStatesOf(stateSize) }

// worstCaseStatesOf are the worst-case states of about size bytes.
func worstCaseStatesOf(stateSize int) map[string][]byte {
	nested := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	return map[string][]byte{
		"empty resources": repeated("", `{}`, "", stateSize),
		"empty instances": repeated(`{"mode":"managed","type":"aws_vpc","name":"v","instances":[`, `{}`, `]}`, stateSize),
		"empty objects in an attribute": repeated(`{"mode":"managed","type":"aws_vpc","name":"v","instances":[{"attributes":{"id":"vpc-1","tags":[`,
			`{}`, `]}}]}`, stateSize),
		"empty objects in a named list": repeated(sgRule+"[", `{}`, `]}}]}`, stateSize),
		"long array in an attribute": repeated(`{"mode":"managed","type":"aws_vpc","name":"v","instances":[{"attributes":{"id":"vpc-1","tags":[`,
			`0`, `]}}]}`, stateSize),
		"long array in a named list": repeated(sgRule+"[", `""`, `]}}]}`, stateSize),
		"deep nesting in an attribute": repeated(`{"mode":"managed","type":"aws_vpc","name":"v","instances":[`,
			`{"index_key":%d,"attributes":{"id":"vpc-1","tags":`+nested+`}}`, `]}`, stateSize),
		"deep nesting in a named attribute": repeated(`{"mode":"managed","type":"aws_security_group_rule","name":"r","instances":[`,
			`{"index_key":%d,"attributes":{"security_group_id":"sg","type":"ingress","self":false,"source_security_group_id":null,"cidr_blocks":[`+nested+`]}}`, `]}`, stateSize),
		"many instances": repeated(`{"mode":"managed","type":"aws_vpc","name":"v","instances":[`,
			`{"index_key":%d,"attributes":{"id":"%d"}}`, `]}`, stateSize),
		"many unimportable instances": repeated(`{"mode":"managed","type":"aws_vpc","name":"v","instances":[`,
			`{"index_key":%d}`, `]}`, stateSize),
		"many resources": repeated("", `{"mode":"managed","type":"aws_vpc","name":"v%d","instances":[{"attributes":{"id":"%d"}}]}`, "", stateSize),
		"many attributes": repeated(`{"mode":"managed","type":"aws_vpc","name":"v","instances":[{"attributes":{"id":"vpc-1",`,
			`"a%d":{}`, `}}]}`, stateSize),
	}
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Indexing a state and listing its addresses decode only what they use: the worst a
// state of many empty objects, deep nesting or long arrays can make them allocate is a
// small multiple of its size.
func TestIndexingAStateCostsAtMostASmallMultipleOfItsSize(t *testing.T) {
	ids, err := ParseIDs(worstCaseIDs)
	if err != nil {
		t.Fatal(err)
	}
	for name, state := range worstCaseStates() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var indexErr, addressesErr error
			index := allocated(func() { _, indexErr = ids.Index(state) })
			addresses := allocated(func() { _, addressesErr = Addresses(state) })
			g.Expect(indexErr).NotTo(HaveOccurred())
			g.Expect(addressesErr).NotTo(HaveOccurred())
			t.Logf("%s, %d bytes: Index allocates %.1f bytes a byte, Addresses %.1f",
				name, len(state), float64(index)/float64(len(state)), float64(addresses)/float64(len(state)))
			g.Expect(index).To(BeNumerically("<", maxAllocatedPerByte*len(state)), "Index")
			g.Expect(addresses).To(BeNumerically("<", maxAllocatedPerByte*len(state)), "Addresses")
		})
	}
}

func mapsKeys[K comparable, V any](m map[K]V) iter.Seq[K] { return maps.Keys(m) }

// The controller's bound on a state (--max-state-size) assumes that a reader holds a
// state at most twice: indexing a state at the chart's bound that yields no index of its
// own size (empty objects, deep nesting, long arrays) allocates less than the state
// again, so that even garbage never collected keeps it within that.
func TestIndexingAStateAtTheChartsBoundHoldsItAtMostTwice(t *testing.T) {
	ids, err := ParseIDs(worstCaseIDs)
	if err != nil {
		t.Fatal(err)
	}
	for name, state := range worstCaseStatesOf(chartBound) {
		if strings.HasPrefix(name, "many") {
			continue // an index of many addresses is as large as they are
		}
		g := NewWithT(t)
		var indexErr error
		index := allocated(func() { _, indexErr = ids.Index(state) })
		g.Expect(indexErr).NotTo(HaveOccurred(), name)
		g.Expect(index).To(BeNumerically("<", len(state)), name)
	}
}
