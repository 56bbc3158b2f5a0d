package run

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamesAreGardenersTerraformerNames(t *testing.T) {
	g := NewWithT(t)
	id := ID{Namespace: "shoot--dev--a", Name: "a", Purpose: PurposeInfra}
	g.Expect([]string{id.ConfigName(), id.VarsName(), id.StateName(), id.PodName(), id.EnvSecretName(), id.CredentialsName()}).To(Equal([]string{
		"a.infra.tf-config", "a.infra.tf-vars", "a.infra.tf-state", "a.infra.tf-run", "a.infra.tf-env", "a.infra.credentials",
	}))
	g.Expect(id.Dir()).To(Equal("shoot--dev--a/a.infra"))
	g.Expect(ID{Namespace: "ns", Name: "a", Purpose: "controlplane"}.StateName()).To(Equal("a.controlplane.tf-state"))

	g.Expect(id.Validate()).To(Succeed())
	err := ID{Namespace: "ns", Name: "a"}.Validate()
	g.Expect(err).To(MatchError(ErrInvalidInput))
	g.Expect(err.Error()).To(Equal("purpose: must not be empty"))
}

// The labels of a run are valid label values for any name an object may have.
func TestTheLabelsOfARunAreValidForAnyName(t *testing.T) {
	g := NewWithT(t)
	for _, name := range []string{"a", strings.Repeat("b", 63), strings.Repeat("c", 64), strings.Repeat("d.", 120) + "e"} {
		for key, value := range (ID{Namespace: "ns", Name: name, Purpose: PurposeInfra}).Labels() {
			g.Expect(validation.IsValidLabelValue(value)).To(BeEmpty(), "%s of a name of %d characters", key, len(name))
		}
	}
	g.Expect(ID{Name: strings.Repeat("b", 63)}.Labels()[LabelInfrastructure]).To(Equal(strings.Repeat("b", 63)), "a name that fits is the value")
}
