package executor

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// A run pod gets the plan a request allows and the request's parallelism over the
// executor's.
func TestARunPodCarriesTheAllowedPlanAndTheProvidersParallelism(t *testing.T) {
	g := NewWithT(t)
	e := &PodExecutor{Image: "terraformer", Settings: terraformer.Settings{Parallelism: 10}}
	req := run.Request{ID: run.ID{Namespace: "ns", Name: "a", Purpose: run.PurposeInfra}, Command: run.Apply,
		ProtectedTypes: []string{"aws_vpc"}, AllowDestroyPlan: "sha256:0123456789abcdef", Parallelism: 3}
	g.Expect(req.Validate()).To(Succeed())
	args := e.podFor(req, nil, []metav1.OwnerReference{}, false).Spec.Containers[0].Args
	g.Expect(args).To(ContainElements("--allow-destroy-plan", "sha256:0123456789abcdef"))
	g.Expect(args).To(ContainElements("--parallelism", "3"))
	g.Expect(args).NotTo(ContainElement("10"))

	req.AllowDestroyPlan = "sha256:nothex"
	g.Expect(req.Validate()).To(MatchError(ContainSubstring("allowDestroyPlan")))
}
