package state

import (
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// A state's outputs are decoded with their JSON types, apart by whether they are
// sensitive; outputs that would decode to many times the state, as a mebibyte of empty
// objects would, are refused as invalid, at a cost of a small multiple of the state.
func TestOutputsAreDecodedWithinASmallMultipleOfTheState(t *testing.T) {
	g := NewWithT(t)
	resources := `"resources":[{"mode":"managed","type":"aws_vpc","name":"v","instances":[{"attributes":{"id":"vpc-1","cidr_block":"10.0.0.0/16","tags":{"Name":"shoot--p--s"}}}]}]`
	plain, sensitive, err := SplitOutputs([]byte(`{"version":4,"serial":1,"outputs":{
		"vpc_id":{"value":"vpc-1","type":"string"},
		"subnets":{"value":[{"id":"subnet-1","zone":"a","purpose":"nodes"},{"id":"subnet-2","zone":"b","purpose":"public"}],"type":["list","object"]},
		"count":{"value":3,"type":"number"},"none":{"value":null,"type":"string"},
		"key":{"value":"secret \"pem\"","type":"string","sensitive":true}},` + resources + `}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain).To(Equal(map[string]any{"vpc_id": "vpc-1", "count": float64(3), "none": nil, "subnets": []any{
		map[string]any{"id": "subnet-1", "zone": "a", "purpose": "nodes"}, map[string]any{"id": "subnet-2", "zone": "b", "purpose": "public"}}}))
	g.Expect(sensitive).To(Equal(map[string]any{"key": `secret "pem"`}))

	for _, value := range []string{`{}`, `[]`, `0`, `{"a":{}}`} {
		state := []byte(`{"version":4,"outputs":{"o":{"value":[` + strings.TrimSuffix(strings.Repeat(value+",", 1<<20/(len(value)+1)), ",") + `]}},` + resources + `}`)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err := SplitOutputs(state)
		runtime.ReadMemStats(&after)
		g.Expect(err).To(And(MatchError(ErrInvalid), MatchError(ContainSubstring("the outputs hold"))), value)
		g.Expect(after.TotalAlloc-before.TotalAlloc).To(BeNumerically("<", 4*len(state)), value)
	}
}
