package imports

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

// An index too large for a plain annotation is kept compressed and reads back the same.
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
	decoded, err := Decode(encoded)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(decoded).To(Equal(index))
	_, err = Decode("gzip:not base64!")
	g.Expect(err).To(MatchError(ContainSubstring("state index")))
}
