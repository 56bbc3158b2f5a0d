package tftest

import (
	"errors"

	"github.com/onsi/gomega"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/errorcodes"
	"github.com/terraseed/terraseed/terraform/run"
)

// ExpectRunError checks that err is a *run.Error whose message is fit for a status: short,
// without terminal colours or UUIDs.
func ExpectRunError(g gomega.Gomega, err error) *run.Error {
	var re *run.Error
	g.Expect(errors.As(err, &re)).To(gomega.BeTrue(), "a *RunError, got %v", err)
	g.Expect(re.Message).NotTo(gomega.MatchRegexp(`\x1b\[`))
	g.Expect(re.Message).NotTo(gomega.MatchRegexp(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`))
	g.Expect(len(re.Message)).To(gomega.BeNumerically("<", 1000))
	return re
}

// CodesOf are the codes the controller gives a failed run.
func CodesOf(re *run.Error) []extensionsv1alpha1.ErrorCode {
	return errorcodes.Classify(re.Blocks)
}
