package kinds

import (
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// A rolled back state gets its new serial and keeps everything else byte for byte, at a
// cost of about its size: a state nesting its values deep, which encoding it again would
// indent to the square of its depth, too.
func TestARolledBackStateChangesOnlyItsSerial(t *testing.T) {
	g := NewWithT(t)
	for state, want := range map[string]string{
		`{"version":4, "serial": 7,"lineage":"l","resources":[{"serial":1}]}`: `{"version":4, "serial": 12,"lineage":"l","resources":[{"serial":1}]}`,
		`{"serial":7,"lineage":"l","serial":8}`:                               `{"serial":12,"lineage":"l","serial":12}`,
		`{"version":4,"lineage":"l"}`:                                         `{"serial":12,"version":4,"lineage":"l"}`,
		" { \n } ":                                                            ` {"serial":12 ` + "\n } ",
	} {
		got, err := withSerial([]byte(state), 12)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(got)).To(Equal(want), state)
	}
	for _, state := range []string{``, `null`, `[]`, `{"serial":1`, `{"serial":1} {}`} {
		_, err := withSerial([]byte(state), 12)
		g.Expect(err).To(MatchError(tfstate.ErrInvalid), state)
	}

	nested := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	deep := []byte(`{"version":4,"serial":3,"lineage":"l","resources":[` + strings.TrimSuffix(strings.Repeat(nested+",", 100), ",") + `]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := withSerial(deep, 4)
	runtime.ReadMemStats(&after)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal(strings.Replace(string(deep), `"serial":3`, `"serial":4`, 1)))
	g.Expect(after.TotalAlloc - before.TotalAlloc).To(BeNumerically("<", 4*len(deep)))
}
