package executor

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// A local run reads its state under the bound the controller was given, as a run pod
// does: a state larger than --max-state-size fails the run naming the figure, instead of
// being decoded in the controller's process whatever its size.
func TestALocalRunDecodesItsStateWithinTheControllersBound(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 20)
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	stored, err := f.Objects.ReadState(t.Context(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	bound := len(stored) / 2
	g.Expect(bound).To(BeNumerically(">", 1024), "a state of 20 resources takes more than 2 KiB")

	f.executor.State = state.Options{MaxSize: bound}
	_, err = f.run(run.Apply)
	g.Expect(err).To(MatchError(ContainSubstring(state.ErrOverBound.Error())))
	g.Expect(err.Error()).To(ContainSubstring("%d bytes", bound))
	after, err := f.Objects.ReadState(t.Context(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(stored), "a refused state is left as it was")
}
