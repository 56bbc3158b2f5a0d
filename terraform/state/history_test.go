package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terraseed/terraseed/terraform/run"
)

func stateOfSerial(serial int, padding string) []byte {
	return fmt.Appendf(nil, `{"version":4,"serial":%d,"lineage":"l-1","resources":[{"mode":"managed","type":"t","name":"n","instances":[{"attributes":{"id":"x","pad":%q}}]}]}`, serial, padding)
}

// The history keeps the newest states up to its depth and one object's size, writes
// nothing for a state it holds already, and goes with the run objects.
func TestHistoryIsBoundedAndDeletedWithTheRunObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "infra", Purpose: run.PurposeInfra}}
	now := metav1.Now()
	for serial := 1; serial <= 4; serial++ {
		wrote, err := objects.AppendHistory(ctx, env.Client, stateOfSerial(serial, ""), 3, now)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(wrote).To(BeTrue())
	}
	wrote, err := objects.AppendHistory(ctx, env.Client, stateOfSerial(4, ""), 3, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wrote).To(BeFalse(), "the state it holds already costs no write")
	h, err := objects.ReadHistory(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Entries).To(HaveLen(3))
	g.Expect(h.Entries[0]).To(And(HaveField("Serial", int64(4)), HaveField("Lineage", "l-1"), HaveField("Resources", 1)))
	g.Expect(h.Entries[2].Serial).To(BeEquivalentTo(2))
	state, err := h.State(h.Entries[1])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state).To(Equal(stateOfSerial(3, "")))

	// States that do not compress push the older ones out of the object.
	random := make([]byte, 300<<10)
	_, _ = rand.Read(random)
	for serial := 5; serial <= 8; serial++ {
		_, err := objects.AppendHistory(ctx, env.Client, stateOfSerial(serial, hex.EncodeToString(random)+strings.Repeat("x", serial)), 5, now)
		g.Expect(err).NotTo(HaveOccurred())
	}
	h, err = objects.ReadHistory(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(h.Entries)).To(BeNumerically("<", 5))
	g.Expect(h.Entries[0].Serial).To(BeEquivalentTo(8))

	g.Expect(objects.Delete(ctx, env.Client)).To(Succeed())
	err = env.Client.Get(ctx, objects.key(objects.HistoryName()), &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
}
