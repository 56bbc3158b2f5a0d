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

func TestAPlanDigestIsOfTheConfigurationAndTheChangesInAnyOrder(t *testing.T) {
	g := NewWithT(t)
	replace := Change{Address: "aws_vpc.vpc", Type: "aws_vpc", Action: "replace"}
	create := Change{Address: "aws_subnet.a", Type: "aws_subnet", Action: "create"}
	noop := Change{Address: "aws_eip.a", Type: "aws_eip", Action: "noop"}
	digest := PlanDigest("config-1", []Change{replace, create})
	g.Expect(digest).To(MatchRegexp(PlanDigestValue.String()))
	g.Expect(PlanDigest("config-1", []Change{create, noop, replace})).To(Equal(digest), "the order and what does not change do not count")
	g.Expect(PlanDigest("config-2", []Change{replace, create})).NotTo(Equal(digest), "another configuration")
	g.Expect(PlanDigest("config-1", []Change{replace})).NotTo(Equal(digest), "other changes")
	deleted := Change{Address: "aws_subnet.a", Type: "aws_subnet", Action: "delete"}
	g.Expect(PlanDigest("config-1", []Change{replace, deleted})).NotTo(Equal(digest), "another action")
}
