package imports

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// An index too large for a plain annotation is kept compressed, for an operator to read.
func TestLargeIndexRoundTrips(t *testing.T) {
	g := NewWithT(t)
	index := &Index{Serial: 9, Lineage: "l", IDs: map[string]string{}}
	for i := range 5000 {
		index.IDs[fmt.Sprintf(`aws_subnet.s["%d"]`, i)] = fmt.Sprintf("subnet-%08d", i)
	}
	encoded, err := Encode(index)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(encoded).To(HavePrefix(indexCompressedPrefix))
	g.Expect(len(encoded)).To(BeNumerically("<", indexPlainLimit))
	compressed, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(encoded, indexCompressedPrefix))
	g.Expect(err).NotTo(HaveOccurred())
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	g.Expect(err).NotTo(HaveOccurred())
	decoded := &Index{}
	g.Expect(json.NewDecoder(zr).Decode(decoded)).To(Succeed())
	g.Expect(decoded).To(Equal(index))
}
