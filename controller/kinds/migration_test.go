package kinds_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// realObjects returns the UIDs of what the local provider created, by name.
func realObjects(g Gomega, s *shoot) map[string]types.UID {
	ctx := context.Background()
	uids := map[string]types.UID{}
	namespace := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, namespace)).To(Succeed())
	uids["namespace"] = namespace.UID
	policies := &networkingv1.NetworkPolicyList{}
	g.Expect(env.Client.List(ctx, policies, client.InNamespace(s.targetNamespace()))).To(Succeed())
	for _, p := range policies.Items {
		uids["networkpolicy/"+p.Name] = p.UID
	}
	secrets := &corev1.SecretList{}
	g.Expect(env.Client.List(ctx, secrets, client.InNamespace(s.targetNamespace()))).To(Succeed())
	for _, secret := range secrets.Items {
		uids["secret/"+secret.Name] = secret.UID
	}
	return uids
}

func annotate(g Gomega, s *shoot, operation string) {
	g.Eventually(func(g Gomega) {
		infra := s.get(g)
		if infra.Annotations == nil {
			infra.Annotations = map[string]string{}
		}
		infra.Annotations[extension.AnnotationOperation] = operation
		g.Expect(env.Client.Update(context.Background(), infra)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func TestMigrateThenRestoreRecreatesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19", "10.250.32.0/19")
	s.createSecret(t, adminKubeconfig(t))
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	created := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	before := realObjects(g, s)
	g.Expect(before).To(HaveKey("networkpolicy/zone-1"))

	// migrate: the state moves into .status.state, the run objects and the finalizer go,
	// every real object stays.
	annotate(g, s, extension.OperationMigrate)
	migrated := s.waitHandled(t, extensionsv1alpha1.LastOperationTypeMigrate)
	g.Expect(migrated.Status.State).NotTo(BeNil())
	g.Expect(migrated.Finalizers).NotTo(ContainElement(kinds.InfrastructureFinalizer))
	assertRunObjectsGone(g, s)
	g.Expect(realObjects(g, s)).To(Equal(before))

	// Deleting the migrated Infrastructure destroys nothing.
	g.Expect(env.Client.Delete(ctx, migrated)).To(Succeed())
	s.waitGone(t)
	g.Consistently(func(g Gomega) { g.Expect(realObjects(g, s)).To(Equal(before)) }).WithTimeout(2 * time.Second).Should(Succeed())

	// Restore as Gardener does it: create waiting for the state, write the state, then ask to restore.
	restored := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.namespace, Name: s.infra.Name,
			Annotations: map[string]string{extension.AnnotationOperation: extension.OperationWaitForState},
		},
		Spec: created.Spec,
	}
	g.Expect(env.Client.Create(ctx, restored)).To(Succeed())
	restored.Status.State = migrated.Status.State
	g.Expect(env.Client.Status().Update(ctx, restored)).To(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(s.get(g).Status.LastOperation).To(BeNil()) }).
		WithTimeout(2*time.Second).Should(Succeed(), "nothing happens while waiting for the state")
	annotate(g, s, extension.OperationRestore)

	infra := s.waitHandled(t, extensionsv1alpha1.LastOperationTypeRestore)
	g.Expect(infra.Finalizers).To(ContainElement(kinds.InfrastructureFinalizer))
	g.Expect(infra.Status.ProviderStatus.Raw).To(MatchJSON(created.Status.ProviderStatus.Raw))
	g.Expect(realObjects(g, s)).To(Equal(before), "every real object keeps its UID")

	stored, err := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).NotTo(BeEmpty())
}

// TestMigrateWaitsForTheRunUnderWay asks for a migrate while an apply runs, with a second
// controller on the same machine as after a change of leader: the migrate ends only after
// the run, its snapshot is the run's final state, and nothing writes the state afterwards.
func TestMigrateWaitsForTheRunUnderWay(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowShoot(t, `{"steps":3,"seconds":4}`)
	dir := workDir(t)
	startController(t, s.namespace, dir)
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitForRunStart(t)
	startController(t, s.namespace, dir)

	annotate(g, s, extension.OperationMigrate)
	migrated := s.waitHandled(t, extensionsv1alpha1.LastOperationTypeMigrate)
	g.Expect(strings.Count(string(kept(g, migrated)), `"index_key"`)).To(Equal(3), "the snapshot holds every step the run made")
	g.Consistently(func(g Gomega) { assertRunObjectsGone(g, s) }).WithTimeout(5*time.Second).Should(Succeed(), "no run writes the state after the migrate")
}

// kept is the terraform state in .status.state.
func kept(g Gomega, infra *extensionsv1alpha1.Infrastructure) []byte {
	g.Expect(infra.Status.State).NotTo(BeNil())
	var status struct {
		TerraformState []byte `json:"terraformState"`
	}
	g.Expect(json.Unmarshal(infra.Status.State.Raw, &status)).To(Succeed())
	reader, err := gzip.NewReader(bytes.NewReader(status.TerraformState))
	g.Expect(err).NotTo(HaveOccurred())
	state, err := io.ReadAll(reader)
	g.Expect(err).NotTo(HaveOccurred())
	return state
}
