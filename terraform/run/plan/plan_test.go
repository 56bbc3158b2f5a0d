package plan

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestAPlanDigestIsOfTheConfigurationAndTheChangesInAnyOrder(t *testing.T) {
	g := NewWithT(t)
	replace := Change{Address: "aws_vpc.vpc", Type: "aws_vpc", Action: "replace"}
	create := Change{Address: "aws_subnet.a", Type: "aws_subnet", Action: "create"}
	noop := Change{Address: "aws_eip.a", Type: "aws_eip", Action: "noop"}
	digest := Digest("config-1", []Change{replace, create})
	g.Expect(digest).To(MatchRegexp(DigestValue.String()))
	g.Expect(Digest("config-1", []Change{create, noop, replace})).To(Equal(digest), "the order and what does not change do not count")
	g.Expect(Digest("config-2", []Change{replace, create})).NotTo(Equal(digest), "another configuration")
	g.Expect(Digest("config-1", []Change{replace})).NotTo(Equal(digest), "other changes")
	deleted := Change{Address: "aws_subnet.a", Type: "aws_subnet", Action: "delete"}
	g.Expect(Digest("config-1", []Change{replace, deleted})).NotTo(Equal(digest), "another action")
}
