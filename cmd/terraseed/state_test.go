package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/terraseed/terraseed/api/scheme"
	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/infrastructure"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// Every bad use of the state commands is refused before the seed is reached, naming
// what is wrong.
func TestStateCommandsNameTheirBadArguments(t *testing.T) {
	g := NewWithT(t)
	for args, problem := range map[string][]string{
		"usage: terraseed state": {"rewind", "ns/name"},
		"NAMESPACE/NAME":         {"history", "name-only"},
		"SERIAL":                 {"rollback", "ns/name", "latest"},
	} {
		err := runState(context.Background(), problem, &bytes.Buffer{})
		g.Expect(err).To(MatchError(ContainSubstring(args)), "%v", problem)
	}
	g.Expect(runState(context.Background(), []string{"rollback", "ns/name"}, &bytes.Buffer{})).To(MatchError(ContainSubstring("usage")))
}

// stateOf is a terraform state of lineage and serial holding a zone resource per zone.
func stateOf(lineage string, serial int64, zones int) []byte {
	resources := make([]string, zones)
	for i := range resources {
		resources[i] = fmt.Sprintf(`{"mode":"managed","type":"terraform_data","name":"zone","instances":[{"index_key":%d,"attributes":{"id":"zone-%d-%d"}}]}`, i, serial, i)
	}
	return fmt.Appendf(nil, `{"version":4,"serial":%d,"lineage":%q,"resources":[%s]}`, serial, lineage, strings.Join(resources, ","))
}

// liveState is the serial, lineage and resources of the live state of objects.
func liveState(g Gomega, c client.Client, objects tfstate.RunObjects) (raw []byte, serial int64, lineage string, resources int) {
	raw, err := objects.ReadState(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	var parsed struct {
		Serial    int64
		Lineage   string
		Resources []json.RawMessage
	}
	g.Expect(json.Unmarshal(raw, &parsed)).To(Succeed())
	return raw, parsed.Serial, parsed.Lineage, len(parsed.Resources)
}

func seedWith(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
}

func stateCommandInfrastructure() *extensionsv1alpha1.Infrastructure {
	return &extensionsv1alpha1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: "infra", UID: "uid-1"}}
}

// The history lists the kept states newest first, in either kind of object; a state
// rolled back to an older serial becomes the live one as a newer serial of the same
// lineage, and can be rolled forward again the same way.
func TestStateHistoryAndRollbackToAnOlderSerialAndBack(t *testing.T) {
	for _, storage := range tfstate.Storages {
		t.Run(storage.Kind(), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			infra := stateCommandInfrastructure()
			key := client.ObjectKeyFromObject(infra)
			c := seedWith(infra)
			objects := tfstate.Options{Storage: storage}.Objects(infrastructure.RunID(infra))
			for serial := int64(1); serial <= 2; serial++ {
				_, err := objects.Store(c).Save(ctx, stateOf("l-1", serial, int(serial)))
				g.Expect(err).NotTo(HaveOccurred())
				_, err = objects.AppendHistory(ctx, c, stateOf("l-1", serial, int(serial)), 5, metav1.Now())
				g.Expect(err).NotTo(HaveOccurred())
			}

			entries, err := stateHistory(ctx, c, key)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(entries).To(HaveLen(2))
			g.Expect(entries[0]).To(And(HaveField("Serial", int64(2)), HaveField("Lineage", "l-1"), HaveField("Resources", 2)))
			g.Expect(entries[1]).To(And(HaveField("Serial", int64(1)), HaveField("Lineage", "l-1"), HaveField("Resources", 1)))
			g.Expect(entries[0].Time.IsZero()).To(BeFalse())

			back, err := rollbackState(ctx, c, key, 1)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(back).To(Equal(int64(3)))
			_, serial, lineage, resources := liveState(g, c, objects)
			g.Expect([]any{serial, lineage, resources}).To(Equal([]any{int64(3), "l-1", 1}))

			forth, err := rollbackState(ctx, c, key, 2)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(forth).To(Equal(back + 1))
			_, serial, _, resources = liveState(g, c, objects)
			g.Expect([]any{serial, resources}).To(Equal([]any{forth, 2}))

			_, err = rollbackState(ctx, c, key, 999)
			g.Expect(err).To(MatchError(errNotInHistory))

			// The live state is another infrastructure's: nothing of this history replaces it.
			other := stateOf("another-lineage", 9, 1)
			g.Expect(objects.Store(c).Replace(ctx, other)).To(Succeed())
			_, err = rollbackState(ctx, c, key, 1)
			g.Expect(err).To(MatchError(tfstate.ErrLineageMismatch))
			g.Expect(err).To(MatchError(ContainSubstring("another-lineage")))
			after, _, _, _ := liveState(g, c, objects)
			g.Expect(after).To(Equal(other))
		})
	}
}

// No rollback while a run may write the state: an operation is under way, or a run pod
// exists.
func TestRollbackIsRefusedWhileARunMayWriteTheState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	processing := stateCommandInfrastructure()
	processing.Status.LastOperation = &extensionsv1alpha1.LastOperation{
		Type: extensionsv1alpha1.LastOperationTypeReconcile, State: extensionsv1alpha1.LastOperationStateProcessing,
	}
	_, err := rollbackState(ctx, seedWith(processing), client.ObjectKeyFromObject(processing), 1)
	g.Expect(err).To(MatchError(errRunUnderWay))

	idle := stateCommandInfrastructure()
	id := infrastructure.RunID(idle)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.PodName()}}
	_, err = rollbackState(ctx, seedWith(idle, pod), client.ObjectKeyFromObject(idle), 1)
	g.Expect(err).To(MatchError(errRunUnderWay))
	g.Expect(err).To(MatchError(ContainSubstring(id.PodName())))
}
