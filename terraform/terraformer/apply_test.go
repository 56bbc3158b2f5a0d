package terraformer

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

func TestApplyCreatesObjectsAndDestroyRemovesThem(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 20)

	started := time.Now()
	result, err := f.run(run.Apply)
	took := time.Since(started)
	g.Expect(err).NotTo(HaveOccurred())
	items := f.ExpectEachItemOnceInState(g, 20)

	g.Expect(result.Outputs).To(HaveKeyWithValue("namespace", f.Namespace))
	g.Expect(result.Outputs).To(HaveKeyWithValue("resources", float64(20)))
	g.Expect(result.Outputs["names"]).To(BeAssignableToTypeOf([]any{}))
	g.Expect(result.Outputs["names"]).To(ConsistOf(anySlice(items)...))
	g.Expect(result.Outputs["labels"]).To(BeAssignableToTypeOf(map[string]any{}))
	g.Expect(result.Outputs["labels"]).To(HaveLen(20))
	g.Expect(f.Finalizers(g)).To(HaveEach(ConsistOf(state.Finalizer)))
	g.Expect(result.Phases).To(HaveLen(2))
	g.Expect(result.Phases).To(And(HaveKeyWithValue("init", BeNumerically(">", 0)), HaveKeyWithValue("apply", BeNumerically(">", 0))))
	g.Expect(result.Phases["init"]+result.Phases["apply"]).To(BeNumerically("<=", took), "each phase is timed apart: none counts another's time")

	result, err = f.run(run.Destroy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Phases).To(And(HaveLen(1), HaveKeyWithValue("destroy", BeNumerically(">", 0))), "the working directory is initialised for the configuration already")
	f.ExpectEachItemOnceInState(g, 0)
	g.Expect(f.Finalizers(g)).To(HaveEach(BeEmpty()))
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
