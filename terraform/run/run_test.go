package run

import (
	"testing"

	. "github.com/onsi/gomega"
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
