package termination

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
)

// failedLog is terraform's output of a failed command, without colour.
const failedLog = "Initializing the backend...\n\n" +
	"Error: Unterminated template string\n\n" +
	"  on main.tf line 2, in resource \"terraform_data\" \"broken\":\n" +
	"   2:   input = \"unterminated\n\n" +
	"No closing marker was found for the string.\n"

func writeAndParse(g Gomega, dir string, phases run.Phases, runErr error) (string, run.Phases, *run.Error, bool) {
	path := filepath.Join(dir, "termination-log")
	g.Expect(writeMessage(path, phases, runErr)).To(Succeed())
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	parsed, re, ok := Parse(string(data))
	return string(data), parsed, re, ok
}

func TestTerminationMessagesRebuildTheRunError(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	phases := run.Phases{"init": 2 * time.Second, "apply": 1500 * time.Millisecond}

	_, parsed, re, ok := writeAndParse(g, dir, phases, nil)
	g.Expect(ok).To(BeFalse(), "a successful run")
	g.Expect(re).To(BeNil())
	g.Expect(parsed).To(Equal(phases))

	failed := run.NewError("apply", failedLog, errors.New("exit status 1"))
	data, _, re, ok := writeAndParse(g, dir, phases, failed)
	g.Expect(ok).To(BeTrue())
	g.Expect(data).NotTo(ContainSubstring(`"message"`), "the message is the blocks joined, written once")
	g.Expect(re.Command).To(Equal("apply"))
	g.Expect(re.Blocks).To(Equal(failed.Blocks))
	g.Expect(re.Message).To(Equal(failed.Message))
	g.Expect(re.Phases).To(Equal(phases))
	g.Expect(re).To(MatchError(run.ErrTerraformFailed))

	_, _, re, _ = writeAndParse(g, dir, nil, run.InvalidInput("workDir", "must not be empty"))
	g.Expect(re.Invalid).To(BeTrue())
	g.Expect(re).To(MatchError(run.ErrInvalidInput))
	g.Expect(re.Message).To(Equal("workDir: must not be empty"))

	_, _, re, _ = writeAndParse(g, dir, nil, &run.Error{Command: "apply", Message: run.ErrRunInProgress.Error(), Err: run.ErrRunInProgress})
	g.Expect(re).To(MatchError(run.ErrRunInProgress))
	g.Expect(re.Invalid).To(BeFalse())
}

func TestTerminationMessagesOfEarlierRunPodsAreStillClassified(t *testing.T) {
	g := NewWithT(t)
	_, re, ok := Parse(`{"command":"apply","codes":["ERR_INFRA_UNAUTHENTICATED"],"message":"failed to create kubernetes rest client: Unauthorized","phases":{"init":1}}`)
	g.Expect(ok).To(BeTrue())
	g.Expect(re.Blocks).To(Equal([]string{"failed to create kubernetes rest client: Unauthorized"}))
	_, re, _ = Parse(`{"message":"reading ConfigMap a.infra.tf-config: connection refused","retryable":true}`)
	g.Expect(re.Blocks).To(BeEmpty(), "no terraform error to classify")
}

func TestTerminationMessagesFitTheKubeletsLimitKeepingTheFirstBlocks(t *testing.T) {
	g := NewWithT(t)
	var output strings.Builder
	for i := range 20 {
		fmt.Fprintf(&output, "Error: failure %d\n\n%s\n\n", i, strings.Repeat(fmt.Sprintf("detail %d ", i), 80))
	}
	failed := run.NewError("apply", output.String(), nil)
	g.Expect(failed.Blocks).To(HaveLen(20))
	data, _, re, ok := writeAndParse(g, t.TempDir(), nil, failed)
	g.Expect(ok).To(BeTrue())
	g.Expect(len(data)).To(BeNumerically("<=", terminationMessageLimit))
	g.Expect(re.Blocks).To(Equal(failed.Blocks[:len(re.Blocks)]))
	g.Expect(len(re.Blocks)).To(BeNumerically(">=", 5))
}

// A run pod's record goes through the termination message at the millisecond, and a
// message without one (an earlier terraformer's) says so.
func TestTerminationMessagesCarryThePodRecord(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "termination-log")
	started := time.UnixMilli(1_700_000_000_123)
	record := Record{Started: started, TerraformStarted: started.Add(180 * time.Millisecond), Ended: started.Add(2 * time.Second), PeakMemory: 93 << 20}
	g.Expect(Write(path, run.Phases{"init": time.Second}, &record, errors.New("exit status 1"))).To(Succeed())
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	parsed, ok := ParseRecord(string(data))
	g.Expect(ok).To(BeTrue())
	g.Expect(parsed.Started.Equal(record.Started)).To(BeTrue())
	g.Expect(parsed.TerraformStarted.Equal(record.TerraformStarted)).To(BeTrue())
	g.Expect(parsed.Ended.Equal(record.Ended)).To(BeTrue())
	g.Expect(parsed.PeakMemory).To(Equal(record.PeakMemory))
	_, re, ok := Parse(string(data))
	g.Expect(ok).To(BeTrue(), "the record leaves the error as it was")
	g.Expect(re.Message).To(Equal("exit status 1"))

	g.Expect(Write(path, nil, &Record{Started: started, Ended: started.Add(time.Second)}, errors.New("no terraform"))).To(Succeed())
	data, err = os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	parsed, ok = ParseRecord(string(data))
	g.Expect(ok).To(BeTrue())
	g.Expect(parsed.TerraformStarted.IsZero()).To(BeTrue(), "terraform never started")

	_, ok = ParseRecord(`{"phases":{"init":1}}`)
	g.Expect(ok).To(BeFalse(), "an earlier terraformer's message")
	_, ok = ParseRecord("Error: killed")
	g.Expect(ok).To(BeFalse(), "the log the kubelet fell back to")
}
