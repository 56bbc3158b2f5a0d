package kinds

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/imports"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

func stateOperation() (*operation, *events.FakeRecorder) {
	recorder := events.NewFakeRecorder(10)
	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: "infra"}}
	a := &Actuator{Recorder: recorder}
	return a.operation(request{Object: infra, FirstRun: true}), recorder
}

// A state of several MiB, as a large shoot's, compresses into the status and comes back
// byte for byte.
func TestLargeStateRoundTripsThroughTheStatus(t *testing.T) {
	g := NewWithT(t)
	var state bytes.Buffer
	state.WriteString(`{"version":4,"serial":7,"lineage":"l","resources":[`)
	for i := 0; state.Len() < 3<<20; i++ {
		fmt.Fprintf(&state, `{"type":"aws_subnet","name":"subnet_%d","instances":[{"attributes":{"id":"subnet-%08d","cidr_block":"10.%d.%d.0/24"}}]},`, i, i, i/256%256, i%256)
	}
	state.WriteString(`{}]}`)
	op, recorder := stateOperation()
	g.Expect(op.keepStateInStatus(state.Bytes(), nil)).To(Succeed())
	g.Expect(op.status().State).NotTo(BeNil())
	g.Expect(len(op.status().State.Raw)).To(BeNumerically("<", maxStatusState))
	decoded, err := decodeState(op.status().State, op.actuator.State.MaxSize)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(decoded).To(Equal(state.Bytes()))
	g.Expect(recorder.Events).To(BeEmpty())
	// A restore decodes it only within what the controller is given.
	_, err = decodeState(op.status().State, 1<<20)
	g.Expect(err).To(MatchError(tfstate.ErrOverBound))
	g.Expect(err).To(MatchError(ContainSubstring("status.state: terraformState: the terraform state exceeds what this controller decodes: the state expands to more than 1048576 bytes (1.0 MiB)")))
}

// A state that does not fit even compressed is left out of the status, the stale one
// with it, and an event says where the state is.
func TestStateTooLargeForTheStatusIsLeftOut(t *testing.T) {
	g := NewWithT(t)
	state := make([]byte, maxStatusState)
	_, _ = rand.Read(state)
	op, recorder := stateOperation()
	g.Expect(op.keepStateInStatus([]byte(`{"version":4}`), nil)).To(Succeed())
	g.Expect(op.status().State).NotTo(BeNil())

	g.Expect(op.keepStateInStatus(state, nil)).To(Succeed())
	g.Expect(op.status().State).To(BeNil(), "no stale state stays")
	g.Expect(recorder.Events).To(Receive(And(HavePrefix("Warning "+reasonStateTooLarge), ContainSubstring("infra.infra.tf-state"))))
}

func TestInvalidStateInStatusNamesTheField(t *testing.T) {
	g := NewWithT(t)
	op, _ := stateOperation()
	g.Expect(op.keepStateInStatus([]byte(`{"version":4}`), nil)).To(Succeed())
	op.status().State.Raw = []byte(strings.Replace(string(op.status().State.Raw), "InfrastructureState", "Other", 1))
	_, err := decodeState(op.status().State, op.actuator.State.MaxSize)
	g.Expect(err).To(MatchError(ContainSubstring("status.state")))
}

// A state too large for the status leaves its index there: it is what finds the
// resources again should the state be lost.
func TestStateTooLargeForTheStatusKeepsItsIndex(t *testing.T) {
	g := NewWithT(t)
	state := make([]byte, maxStatusState)
	_, _ = rand.Read(state)
	op, _ := stateOperation()
	index := &imports.Index{Serial: 7, Lineage: "l", IDs: map[string]string{"aws_vpc.vpc": "vpc-1"}}
	g.Expect(op.keepStateInStatus(state, index)).To(Succeed())
	g.Expect(op.status().State).NotTo(BeNil())
	g.Expect(statusIndex(op.status().State)).To(Equal(index))
	decoded, err := decodeState(op.status().State, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(decoded).To(BeNil(), "the state itself is left out")
}

// largeIndex is an index whose JSON takes more than the status holds.
func largeIndex(serial int64) *imports.Index {
	index := &imports.Index{Serial: serial, Lineage: "l", IDs: map[string]string{}}
	for i := 0; i < 20_000; i++ {
		index.IDs[fmt.Sprintf("aws_subnet.subnet[%d]", i)] = fmt.Sprintf("subnet-%040d", i)
	}
	return index
}

// An index too large for the status, beside a state too large for it or alone (the state
// kept in Secrets), leaves the index the status held, drops no index silently, and fails
// with an event and an error naming its size and the bound.
func TestAnIndexTooLargeForTheStatusKeepsThePreviousOneAndFailsNamingTheBound(t *testing.T) {
	for name, storage := range map[string]tfstate.Storage{"state in the status": "", "state in Secrets": tfstate.StorageSecret} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			op, recorder := stateOperation()
			op.actuator.State.Storage = storage
			previous := &imports.Index{Serial: 6, Lineage: "l", IDs: map[string]string{"aws_vpc.vpc": "vpc-1"}}
			g.Expect(op.keepStateInStatus([]byte(`{"version":4,"serial":6,"lineage":"l"}`), previous)).To(Succeed())
			g.Expect(statusIndex(op.status().State)).To(Equal(previous))

			state := make([]byte, maxStatusState)
			_, _ = rand.Read(state)
			err := op.keepStateInStatus(state, largeIndex(7))
			g.Expect(err).To(MatchError(MatchRegexp(`^status\.state: the index of the terraform state takes \d+ bytes, more than the 1048576 \.status\.state can hold; the index of serial 6 is kept$`)))
			g.Expect(statusIndex(op.status().State)).To(Equal(previous), "the previous index stays")
			g.Expect(decodeState(op.status().State, 0)).To(BeNil(), "no stale state stays")
			var events []string
			for len(recorder.Events) > 0 {
				events = append(events, <-recorder.Events)
			}
			g.Expect(events).To(ContainElement(And(HavePrefix("Warning "+reasonStateTooLarge), ContainSubstring(err.Error()))))
		})
	}
}

// The interrupted creates of a failed run never overwrite a .status.state that is not
// what this controller writes there: it is left as it was, and an event names the object
// and the creates. An empty status takes them.
func TestInterruptedCreatesNeverOverwriteAStatusStateThatCannotBeRead(t *testing.T) {
	for name, raw := range map[string]string{
		"another kind":  `{"apiVersion":"other.example/v1","kind":"OtherState","data":"kept"}`,
		"not JSON":      `{"apiVersion":`,
		"a wrong field": `{"apiVersion":"terraseed.gardener.cloud/v1alpha1","kind":"InfrastructureState","interrupted":"x"}`,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			op, recorder := stateOperation()
			op.status().State = &runtime.RawExtension{Raw: []byte(raw)}
			op.recordInterrupted(context.Background(), nil, []string{"aws_vpc.vpc"})
			g.Expect(string(op.status().State.Raw)).To(Equal(raw))
			g.Expect(recorder.Events).To(Receive(And(HavePrefix("Warning "+reasonInterruptedNotKept),
				ContainSubstring("aws_vpc.vpc"), ContainSubstring("shoot--p--s/infra"), ContainSubstring("nothing is overwritten"))))
		})
	}
	g := NewWithT(t)
	op, recorder := stateOperation()
	op.recordInterrupted(context.Background(), nil, []string{"aws_vpc.vpc"})
	g.Expect(statusInterrupted(op.status().State)).To(Equal([]string{"aws_vpc.vpc"}))
	g.Expect(recorder.Events).To(BeEmpty())
}
