package terraformer

import (
	"flag"
	"io"
	"testing"

	. "github.com/onsi/gomega"
)

// The flags a run pod gets from the executor reach the run.
func TestTheRunPodsFlagsNameTheAllowedPlanAndTheParallelism(t *testing.T) {
	g := NewWithT(t)
	flags := flag.NewFlagSet("apply", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	o := bindFlags(flags)
	g.Expect(flags.Parse([]string{"--allow-destroy-plan", "sha256:0123456789abcdef", "--parallelism", "3", "--protected-resource-types", "aws_vpc"})).To(Succeed())
	g.Expect(o.allowDestroyPlan).To(Equal("sha256:0123456789abcdef"))
	g.Expect(o.parallelism).To(Equal(3))
	g.Expect(o.allowDestroy).To(BeFalse(), "a plan's digest is not leave to destroy whatever")
}
