package terraformer

import (
	"bytes"
	"context"
	"flag"
	"io"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// An unknown --state-storage stops the run before it reads anything, naming the flag.
func TestAnUnknownStateStorageIsRefused(t *testing.T) {
	g := NewWithT(t)
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"apply", "--namespace", "ns", "--name", "infra", "--state-storage", "etcd",
		"--termination-message-path", filepath.Join(t.TempDir(), "termination-log")}, &stdout, &stderr)
	g.Expect(code).To(Equal(1))
	g.Expect(stderr.String()).To(ContainSubstring(`--state-storage: "etcd" is neither configmap nor secret`))
}

// The flags a run pod gets from the executor reach the run.
func TestTheRunPodsFlagsNameTheAllowedPlanAndTheParallelism(t *testing.T) {
	g := NewWithT(t)
	flags := flag.NewFlagSet("apply", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	o := bindFlags(flags)
	g.Expect(flags.Parse([]string{"--allow-destroy-plan", "sha256:0123456789abcdef", "--parallelism", "3", "--protected-resource-types", "aws_vpc"})).To(Succeed())
	g.Expect(o.allowDestroyPlan).To(Equal("sha256:0123456789abcdef"))
	g.Expect(o.settings.Parallelism).To(Equal(3))
	g.Expect(o.allowDestroy).To(BeFalse(), "a plan's digest is not leave to destroy whatever")
}
