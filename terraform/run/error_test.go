package run

import (
	"testing"

	. "github.com/onsi/gomega"
)

// boxedOutput is terraform's coloured output of two resources failing alike.
const boxedOutput = "\x1b[31m╷\x1b[0m\x1b[0m\n" +
	"\x1b[31m│\x1b[0m \x1b[0m\x1b[1m\x1b[31mError: \x1b[0m\x1b[0m\x1b[1mfailed to create kubernetes rest client for update of resource: Unauthorized\x1b[0m\n" +
	"\x1b[31m│\x1b[0m \x1b[0m\n" +
	"\x1b[31m│\x1b[0m \x1b[0m\x1b[0m  with kubectl_manifest.item[0],\n" +
	"\x1b[31m│\x1b[0m \x1b[0m  on main.tf line 31, in resource \"kubectl_manifest\" \"item\":\n" +
	"\x1b[31m│\x1b[0m \x1b[0m  31: resource \"kubectl_manifest\" \"item\" \x1b[4m{\x1b[0m\x1b[0m\n" +
	"\x1b[31m│\x1b[0m \x1b[0m\n" +
	"\x1b[31m│\x1b[0m \x1b[0mobject item-6f1c2a3e-0b1d-4c5e-8f90-1a2b3c4d5e6f failed\n" +
	"\x1b[31m╵\x1b[0m\x1b[0m\n" +
	"\x1b[31m╷\x1b[0m\x1b[0m\n" +
	"\x1b[31m│\x1b[0m \x1b[0m\x1b[1m\x1b[31mError: \x1b[0m\x1b[0m\x1b[1mfailed to create kubernetes rest client for update of resource: Unauthorized\x1b[0m\n" +
	"\x1b[31m│\x1b[0m \x1b[0m\n" +
	"\x1b[31m│\x1b[0m \x1b[0m\x1b[0m  with kubectl_manifest.item[1],\n" +
	"\x1b[31m│\x1b[0m \x1b[0mobject item-0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d failed\n" +
	"\x1b[31m╵\x1b[0m\x1b[0m\n"

func TestErrorBlocksAreShortCleanAndDeduplicated(t *testing.T) {
	g := NewWithT(t)
	blocks := errorBlocks(boxedOutput)
	g.Expect(blocks).To(Equal([]string{"failed to create kubernetes rest client for update of resource: Unauthorized: object item-<id> failed"}))
}

// plainLog is a run pod's log: terraform's output without colour, then the lines of the
// terraformer around it.
const plainLog = "Initializing the backend...\n\n" +
	"Error: Unterminated template string\n\n" +
	"  on main.tf line 2, in resource \"terraform_data\" \"broken\":\n" +
	"   2:   input = \"unterminated\n\n" +
	"No closing marker was found for the string.\n\n\n" +
	"2026-11-21T04:00:00Z\tINFO\tstateSaved\n" +
	"Error: Unsupported argument\n\n" +
	"An argument named \"nme\" is not expected here.\n\n" +
	"terraformer failed: terraform init: Unterminated template string: No closing marker was found for the string.; Unsupported argument: An argument named \"nme\" is not expected here.\n"

func TestErrorBlocksEndWhereTerraformsOutputEnds(t *testing.T) {
	g := NewWithT(t)
	g.Expect(errorBlocks(plainLog)).To(Equal([]string{
		"Unterminated template string: No closing marker was found for the string.",
		`Unsupported argument: An argument named "nme" is not expected here.`,
	}))
	re := NewError("init", "2026-11-21T04:00:00Z\tINFO\tterraformStarted\nterraformer failed: reading ConfigMap infra.infra.tf-config: connection refused\n", nil)
	g.Expect(re.Message).To(Equal("terraformer failed: reading ConfigMap infra.infra.tf-config: connection refused"), "without error blocks, the last line says what failed")
	g.Expect(re.Blocks).To(Equal([]string{re.Message}))
}
