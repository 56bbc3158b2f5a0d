package controlplane_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/controlplane"
	"github.com/terraseed/terraseed/controller/extension"
)

const timeout = 2 * time.Minute

func localConfig(replicas int) string {
	return `{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"replicas":` + itoa(replicas) + `}}`
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func get(g Gomega, cp *extensionsv1alpha1.ControlPlane) *extensionsv1alpha1.ControlPlane {
	current := &extensionsv1alpha1.ControlPlane{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(cp), current)).To(Succeed())
	return current
}

// waitFor waits until the last operation of the given type succeeded for the current generation.
func waitFor(t *testing.T, cp *extensionsv1alpha1.ControlPlane, opType extensionsv1alpha1.LastOperationType) *extensionsv1alpha1.ControlPlane {
	t.Helper()
	var current *extensionsv1alpha1.ControlPlane
	NewWithT(t).Eventually(func(g Gomega) {
		current = get(g, cp)
		last := current.Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Type).To(Equal(opType), "lastOperation: %+v, lastError: %+v", last, current.Status.LastError)
		g.Expect(last.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "lastOperation: %+v, lastError: %+v", last, current.Status.LastError)
		if opType != extensionsv1alpha1.LastOperationTypeMigrate {
			g.Expect(current.Status.ObservedGeneration).To(Equal(current.Generation))
		}
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	return current
}

func health(g Gomega, cp *extensionsv1alpha1.ControlPlane) extensionsv1alpha1.Condition {
	for _, c := range get(g, cp).Status.Conditions {
		if c.Type == controlplane.ConditionControlPlaneHealthy {
			return c
		}
	}
	g.Expect("no ControlPlaneHealthy condition").To(BeEmpty())
	return extensionsv1alpha1.Condition{}
}

func deployment(g Gomega, ns string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "cloud-controller-manager"}, d)).To(Succeed())
	return d
}

func annotate(g Gomega, cp *extensionsv1alpha1.ControlPlane, operation string) {
	current := get(g, cp)
	patch := client.MergeFrom(current.DeepCopy())
	metav1.SetMetaDataAnnotation(&current.ObjectMeta, extension.AnnotationOperation, operation)
	g.Expect(env.Client.Patch(context.Background(), current, patch)).To(Succeed())
}

func inventoryIDs(g Gomega, cp *extensionsv1alpha1.ControlPlane) []string {
	var state struct {
		Kind      string `json:"kind"`
		Inventory []struct {
			ID string `json:"id"`
		} `json:"inventory"`
	}
	g.Expect(cp.Status.State).NotTo(BeNil())
	g.Expect(json.Unmarshal(cp.Status.State.Raw, &state)).To(Succeed())
	g.Expect(state.Kind).To(Equal("ControlPlaneState"))
	var ids []string
	for _, e := range state.Inventory {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestLocalControlPlaneLifecycle: create, change, migrate, restore and delete a local
// ControlPlane against a real API server whose controller manager runs the Deployments.
func TestLocalControlPlaneLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := newControlPlane(t, "local", localConfig(1))
	ns := cp.Namespace
	startController(t, ns)

	// Create.
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	created := waitFor(t, cp, extensionsv1alpha1.LastOperationTypeCreate)
	g.Expect(created.Finalizers).To(ContainElement(controlplane.Finalizer))
	g.Expect(inventoryIDs(g, created)).To(ConsistOf(
		ns+"_cloud-provider-config__ConfigMap", ns+"_cloud-controller-manager__Service", ns+"_cloud-controller-manager_apps_Deployment"))
	var providerStatus map[string]any
	g.Expect(json.Unmarshal(created.Status.ProviderStatus.Raw, &providerStatus)).To(Succeed())
	g.Expect(providerStatus).To(HaveKeyWithValue("kind", "ControlPlaneStatus"))

	d := deployment(g, ns)
	g.Expect(d.Labels).To(HaveKeyWithValue("controlplane.terraseed.gardener.cloud/name", "control-plane"))
	g.Expect(d.Labels).To(HaveKeyWithValue("controlplane.terraseed.gardener.cloud/namespace", ns))
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("networking.gardener.cloud/to-dns", "allowed"))
	g.Expect(d.ManagedFields).To(ContainElement(HaveField("Manager", controlplane.FieldManager)), "applied server-side by terraseed")
	config := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cloud-provider-config"}, config)).To(Succeed())
	g.Expect(config.Data["cloudprovider.conf"]).To(ContainSubstring("namespace = " + ns + "--infrastructure"))
	g.Eventually(func(g Gomega) {
		list := &appsv1.ReplicaSetList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1), "the controller manager runs the Deployment")
	}).WithTimeout(timeout).Should(Succeed())

	// No node runs the pod: the health check says which workload is unavailable.
	g.Eventually(func(g Gomega) {
		c := health(g, cp)
		g.Expect(c.Status).To(Equal(extensionsv1alpha1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(controlplane.ReasonHealthCheckUnsuccessful))
		g.Expect(c.Message).To(ContainSubstring("Deployment cloud-controller-manager"))
	}).WithTimeout(timeout).Should(Succeed())
	first := health(g, cp)
	g.Eventually(func(g Gomega) {
		g.Expect(health(g, cp).LastUpdateTime.After(first.LastUpdateTime.Time)).To(BeTrue(), "refreshed every period")
	}).WithTimeout(6 * healthPeriod).Should(Succeed())

	// Change: no replica to wait for makes the Deployment available, as the controller
	// manager reports it, and the health check follows.
	current := get(g, cp)
	current.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(localConfig(0))}
	g.Expect(env.Client.Update(ctx, current)).To(Succeed())
	waitFor(t, cp, extensionsv1alpha1.LastOperationTypeReconcile)
	g.Expect(*deployment(g, ns).Spec.Replicas).To(BeZero())
	g.Eventually(func(g Gomega) {
		c := health(g, cp)
		g.Expect(c.Status).To(Equal(extensionsv1alpha1.ConditionTrue), "%+v", c)
		g.Expect(c.Reason).To(Equal(controlplane.ReasonHealthCheckSuccessful))
	}).WithTimeout(timeout).Should(Succeed())

	// An object deleted by hand makes the health check fail at once, as it is a workload.
	g.Expect(env.Client.Delete(ctx, deployment(g, ns))).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := health(g, cp)
		g.Expect(c.Status).To(Equal(extensionsv1alpha1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("Deployment cloud-controller-manager: missing"))
	}).WithTimeout(timeout).Should(Succeed())
	// Gardener asks for a reconcile: the object is back.
	annotate(g, cp, extension.OperationReconcile)
	g.Eventually(func(g Gomega) { deployment(g, ns) }).WithTimeout(timeout).Should(Succeed())

	// Migrate: the objects leave this seed, the inventory stays in the state.
	annotate(g, cp, extension.OperationMigrate)
	migrated := waitFor(t, cp, extensionsv1alpha1.LastOperationTypeMigrate)
	// The migrate releases the object after it reported its success.
	g.Eventually(func(g Gomega) {
		migrated = get(g, cp)
		g.Expect(migrated.Finalizers).NotTo(ContainElement(controlplane.Finalizer))
		g.Expect(migrated.Annotations).NotTo(HaveKey(extension.AnnotationOperation))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(inventoryIDs(g, migrated)).To(HaveLen(3))
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}} {
		name := "cloud-controller-manager"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = "cloud-provider-config"
		}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s is removed by the migrate: %v", obj, name, err)
	}

	// Restore: the objects are back.
	annotate(g, cp, extension.OperationRestore)
	restored := waitFor(t, cp, extensionsv1alpha1.LastOperationTypeRestore)
	g.Expect(restored.Finalizers).To(ContainElement(controlplane.Finalizer))
	deployment(g, ns)

	// Delete: everything goes, then the ControlPlane.
	g.Expect(env.Client.Delete(ctx, cp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cp), &extensionsv1alpha1.ControlPlane{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed())
	for _, name := range []string{"cloud-provider-config"} {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cloud-controller-manager"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

// TestAnObjectNoLongerRenderedIsPruned: the inventory in the state knows what was applied,
// so what the templates no longer render goes, and nothing else in the namespace does.
func TestAnObjectNoLongerRenderedIsPruned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := newControlPlane(t, "pruning", `{"extra": true}`)
	ns := cp.Namespace
	startController(t, ns)
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns}}
	g.Expect(env.Client.Create(ctx, bystander)).To(Succeed())

	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	created := waitFor(t, cp, extensionsv1alpha1.LastOperationTypeCreate)
	g.Expect(inventoryIDs(g, created)).To(ConsistOf(ns+"_always__ConfigMap", ns+"_extra__ConfigMap"))
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "extra"}, &corev1.ConfigMap{})).To(Succeed())

	current := get(g, cp)
	current.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{}`)}
	g.Expect(env.Client.Update(ctx, current)).To(Succeed())
	changed := waitFor(t, cp, extensionsv1alpha1.LastOperationTypeReconcile)
	g.Expect(inventoryIDs(g, changed)).To(ConsistOf(ns + "_always__ConfigMap"))
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "extra"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pruned: %v", err)
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "always"}, &corev1.ConfigMap{})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(bystander), &corev1.ConfigMap{})).To(Succeed(), "what the ControlPlane never applied stays")
	// A ConfigMap is current as soon as it exists.
	g.Eventually(func(g Gomega) {
		g.Expect(health(g, cp).Status).To(Equal(extensionsv1alpha1.ConditionTrue))
	}).WithTimeout(timeout).Should(Succeed())
}

// TestInvalidControlPlaneConfigIsTerminal: an invalid providerConfig fails once, naming the
// field, with Gardener's configuration error code, and nothing is applied.
func TestInvalidControlPlaneConfigIsTerminal(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := newControlPlane(t, "local", `{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"replicas":9}}`)
	startController(t, cp.Namespace)
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	var failed *extensionsv1alpha1.ControlPlane
	g.Eventually(func(g Gomega) {
		failed = get(g, cp)
		g.Expect(failed.Status.LastOperation).NotTo(BeNil())
		g.Expect(failed.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateFailed))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(failed.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	g.Expect(failed.Status.LastError.Description).To(ContainSubstring("providerConfig.cloudControllerManager.replicas"))
	g.Expect(failed.Finalizers).To(BeEmpty(), "nothing was created, so nothing holds the object")
	updated := failed.Status.LastOperation.LastUpdateTime
	g.Consistently(func(g Gomega) {
		g.Expect(get(g, cp).Status.LastOperation.LastUpdateTime).To(Equal(updated), "not retried")
	}).WithTimeout(3 * time.Second).Should(Succeed())
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: cp.Namespace, Name: "cloud-provider-config"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}
