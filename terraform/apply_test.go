package terraform

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestApplyCreatesObjectsAndDestroyRemovesThem(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 20)

	result, err := f.run(Apply)
	g.Expect(err).NotTo(HaveOccurred())
	items := f.items(g)
	g.Expect(items).To(HaveLen(20))
	stateNames, ids := f.stateItems(g)
	g.Expect(stateNames).To(Equal(items))
	g.Expect(ids).To(Equal(20))

	g.Expect(result.Outputs).To(HaveKeyWithValue("namespace", f.namespace))
	g.Expect(result.Outputs).To(HaveKeyWithValue("resources", float64(20)))
	g.Expect(result.Outputs["names"]).To(BeAssignableToTypeOf([]any{}))
	g.Expect(result.Outputs["names"]).To(ConsistOf(anySlice(items)...))
	g.Expect(result.Outputs["labels"]).To(BeAssignableToTypeOf(map[string]any{}))
	g.Expect(result.Outputs["labels"]).To(HaveLen(20))
	g.Expect(f.finalizers(g)).To(HaveEach(ConsistOf(Finalizer)))

	_, err = f.run(Destroy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.items(g)).To(BeEmpty())
	stateNames, ids = f.stateItems(g)
	g.Expect(stateNames).To(BeEmpty())
	g.Expect(ids).To(BeZero())
	g.Expect(f.finalizers(g)).To(HaveEach(BeEmpty()))
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
