package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func writeAndParse(g Gomega, dir string, phases Phases, runErr error) (string, Phases, *Error, bool) {
	path := filepath.Join(dir, "termination-log")
	g.Expect(WriteTerminationMessage(path, phases, runErr)).To(Succeed())
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	parsed, re, ok := ParseTerminationMessage(string(data))
	return string(data), parsed, re, ok
}

func TestTerminationMessagesRebuildTheRunError(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	phases := Phases{"init": 2 * time.Second, "apply": 1500 * time.Millisecond}

	_, parsed, re, ok := writeAndParse(g, dir, phases, nil)
	g.Expect(ok).To(BeFalse(), "a successful run")
	g.Expect(re).To(BeNil())
	g.Expect(parsed).To(Equal(phases))

	failed := NewError("apply", plainLog, errors.New("exit status 1"))
	data, _, re, ok := writeAndParse(g, dir, phases, failed)
	g.Expect(ok).To(BeTrue())
	g.Expect(data).NotTo(ContainSubstring(`"message"`), "the message is the blocks joined, written once")
	g.Expect(re.Command).To(Equal("apply"))
	g.Expect(re.Blocks).To(Equal(failed.Blocks))
	g.Expect(re.Message).To(Equal(failed.Message))
	g.Expect(re.Phases).To(Equal(phases))
	g.Expect(re).To(MatchError(ErrTerraformFailed))

	_, _, re, _ = writeAndParse(g, dir, nil, InvalidInput("workDir", "must not be empty"))
	g.Expect(re.Invalid).To(BeTrue())
	g.Expect(re).To(MatchError(ErrInvalidInput))
	g.Expect(re.Message).To(Equal("workDir: must not be empty"))

	_, _, re, _ = writeAndParse(g, dir, nil, &Error{Command: "apply", Message: ErrRunInProgress.Error(), Err: ErrRunInProgress})
	g.Expect(re).To(MatchError(ErrRunInProgress))
	g.Expect(re.Invalid).To(BeFalse())
}

func TestTerminationMessagesOfEarlierRunPodsAreStillClassified(t *testing.T) {
	g := NewWithT(t)
	_, re, ok := ParseTerminationMessage(`{"command":"apply","codes":["ERR_INFRA_UNAUTHENTICATED"],"message":"failed to create kubernetes rest client: Unauthorized","phases":{"init":1}}`)
	g.Expect(ok).To(BeTrue())
	g.Expect(re.Blocks).To(Equal([]string{"failed to create kubernetes rest client: Unauthorized"}))
	_, re, _ = ParseTerminationMessage(`{"message":"reading ConfigMap a.infra.tf-config: connection refused","retryable":true}`)
	g.Expect(re.Blocks).To(BeEmpty(), "no terraform error to classify")
}

func TestTerminationMessagesFitTheKubeletsLimitKeepingTheFirstBlocks(t *testing.T) {
	g := NewWithT(t)
	var output strings.Builder
	for i := range 20 {
		fmt.Fprintf(&output, "Error: failure %d\n\n%s\n\n", i, strings.Repeat(fmt.Sprintf("detail %d ", i), 80))
	}
	failed := NewError("apply", output.String(), nil)
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
	record := PodRecord{Started: started, TerraformStarted: started.Add(180 * time.Millisecond), Ended: started.Add(2 * time.Second), PeakMemory: 93 << 20}
	g.Expect(WriteTerminationRecord(path, Phases{"init": time.Second}, &record, errors.New("exit status 1"))).To(Succeed())
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	parsed, ok := ParsePodRecord(string(data))
	g.Expect(ok).To(BeTrue())
	g.Expect(parsed.Started.Equal(record.Started)).To(BeTrue())
	g.Expect(parsed.TerraformStarted.Equal(record.TerraformStarted)).To(BeTrue())
	g.Expect(parsed.Ended.Equal(record.Ended)).To(BeTrue())
	g.Expect(parsed.PeakMemory).To(Equal(record.PeakMemory))
	_, re, ok := ParseTerminationMessage(string(data))
	g.Expect(ok).To(BeTrue(), "the record leaves the error as it was")
	g.Expect(re.Message).To(Equal("exit status 1"))

	g.Expect(WriteTerminationRecord(path, nil, &PodRecord{Started: started, Ended: started.Add(time.Second)}, errors.New("no terraform"))).To(Succeed())
	data, err = os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	parsed, ok = ParsePodRecord(string(data))
	g.Expect(ok).To(BeTrue())
	g.Expect(parsed.TerraformStarted.IsZero()).To(BeTrue(), "terraform never started")

	_, ok = ParsePodRecord(`{"phases":{"init":1}}`)
	g.Expect(ok).To(BeFalse(), "an earlier terraformer's message")
	_, ok = ParsePodRecord("Error: killed")
	g.Expect(ok).To(BeFalse(), "the log the kubelet fell back to")
}
