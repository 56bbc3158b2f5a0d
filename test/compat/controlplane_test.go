package compat_test

import (
	"testing"

	v1beta1helper "github.com/gardener/gardener/pkg/api/core/v1beta1/helper"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/component/extensions/controlplane"
	healthchecker "github.com/gardener/gardener/pkg/utils/kubernetes/health/checker"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These tests drive terraseed's ControlPlane controller with Gardener's ControlPlane
// component (pkg/component/extensions/controlplane) at the version this module requires,
// configured as gardenlet's botanist configures it (DefaultControlPlane, which sets no
// purpose since v1.123; DeployControlPlane with the Infrastructure's providerStatus), with
// Gardener's own intervals and timeouts.

const (
	ccmName         = "cloud-controller-manager"
	ccmImage        = "registry.k8s.io/pause:3.10"
	cloudConfigName = "cloud-provider-config"
	cloudConfigKey  = "cloudprovider.conf"
)

// controlPlane is Gardener's ControlPlane component for this shoot.
func (sh *shootInSeed) controlPlane(providerConfig string) controlplane.Interface {
	cp := controlplane.New(testr.New(sh.t), sh.seed.client, &controlplane.Values{
		Name:           sh.shoot.Name,
		Namespace:      sh.namespace,
		Type:           sh.shoot.Spec.Provider.Type,
		ProviderConfig: &runtime.RawExtension{Raw: []byte(providerConfig)},
		Region:         sh.shoot.Spec.Region,
	}, controlplane.DefaultInterval, controlplane.DefaultSevereThreshold, controlplane.DefaultTimeout)
	cp.SetInfrastructureProviderStatus(&runtime.RawExtension{Raw: []byte(sh.localInfrastructureStatus())})
	return cp
}

// localInfrastructureStatus is the providerStatus of the shoot's local Infrastructure with one zone.
func (sh *shootInSeed) localInfrastructureStatus() string {
	return toJSON(map[string]any{
		"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "InfrastructureStatus",
		"namespace": sh.targetNamespace(),
		"zones":     []map[string]string{{"name": "zone-a", "workers": "10.250.0.0/19"}},
	})
}

// localControlPlaneConfig is a ControlPlaneConfig of the local provider.
func localControlPlaneConfig(replicas int) string {
	return toJSON(map[string]any{
		"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "ControlPlaneConfig",
		"cloudControllerManager": map[string]any{
			"image": ccmImage, "replicas": replicas, "featureGates": map[string]bool{"SomeGate": true},
		},
	})
}

func (sh *shootInSeed) getControlPlane(g Gomega) *gardenextensionsv1alpha1.ControlPlane {
	return getExtension(g, sh, &gardenextensionsv1alpha1.ControlPlane{})
}

// expectControlPlaneHealthy reads the ControlPlane and checks it with Gardener's own health check.
func (sh *shootInSeed) expectControlPlaneHealthy(g Gomega) *gardenextensionsv1alpha1.ControlPlane {
	return expectExtensionHealthy(g, sh, &gardenextensionsv1alpha1.ControlPlane{})
}

// describeControlPlane returns, for a failure message, what Gardener looks at in the ControlPlane now.
func (sh *shootInSeed) describeControlPlane() string {
	return describeNow(sh, "ControlPlane", &gardenextensionsv1alpha1.ControlPlane{})
}

// controlPlaneObjects returns the UIDs of the objects the local provider's control plane
// renders into the shoot namespace that exist, by kind and name.
func (sh *shootInSeed) controlPlaneObjects(g Gomega) map[string]types.UID {
	uids := map[string]types.UID{}
	for _, object := range []struct {
		kind, name string
		obj        client.Object
	}{
		{"configmap", cloudConfigName, &corev1.ConfigMap{}},
		{"deployment", ccmName, &appsv1.Deployment{}},
		{"service", ccmName, &corev1.Service{}},
	} {
		err := sh.seed.client.Get(sh.ctx, client.ObjectKey{Namespace: sh.namespace, Name: object.name}, object.obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		uids[object.kind+"/"+object.name] = object.obj.GetUID()
	}
	return uids
}

func (sh *shootInSeed) ccmDeployment(g Gomega) *appsv1.Deployment {
	deployment := &appsv1.Deployment{}
	g.Expect(sh.seed.client.Get(sh.ctx, client.ObjectKey{Namespace: sh.namespace, Name: ccmName}, deployment)).To(Succeed())
	return deployment
}

// expectRendered checks what the local provider's control plane rendered from the
// providerConfig and the Infrastructure's providerStatus, and what it reports.
func (sh *shootInSeed) expectRendered(g Gomega, cp controlplane.Interface, replicas int32) {
	deployment := sh.ccmDeployment(g)
	g.Expect(deployment.Spec.Replicas).To(HaveValue(Equal(replicas)), "the Deployment's replicas come from the providerConfig")
	g.Expect(deployment.Spec.Template.Spec.Containers).To(ContainElement(And(
		HaveField("Image", ccmImage),
		HaveField("Args", ContainElement("--feature-gates=SomeGate=true")),
	)), "the image and feature gates come from the providerConfig")
	cm := &corev1.ConfigMap{}
	g.Expect(sh.seed.client.Get(sh.ctx, client.ObjectKey{Namespace: sh.namespace, Name: cloudConfigName}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue(cloudConfigKey, And(
		ContainSubstring("namespace = "+sh.targetNamespace()), ContainSubstring("zones = zone-a"),
	)), "the cloud-provider config comes from the Infrastructure's providerStatus")
	status := decodeProviderStatus(g, cp.ProviderStatus())
	g.Expect(status).To(HaveKeyWithValue("cloudControllerManager", HaveKeyWithValue("replicas", BeNumerically("==", replicas))),
		"the providerStatus gardenlet reads after Wait")
}

// shootControlPlaneHealthy is the Shoot's ControlPlaneHealthy condition as gardenlet's care
// controller computes it from the ControlPlane's conditions: nil when they report no problem.
func shootControlPlaneHealthy(cp *gardenextensionsv1alpha1.ControlPlane) *gardencorev1beta1.Condition {
	var reported []healthchecker.ExtensionCondition
	for _, condition := range cp.Status.Conditions {
		if condition.Type == gardencorev1beta1.ShootControlPlaneHealthy {
			reported = append(reported, healthchecker.ExtensionCondition{
				Condition: condition, ExtensionType: "ControlPlane", ExtensionName: cp.Name, ExtensionNamespace: cp.Namespace,
			})
		}
	}
	checker := healthchecker.NewHealthChecker(logr.Discard(), nil, clock.RealClock{})
	initial := v1beta1helper.InitConditionWithClock(clock.RealClock{}, gardencorev1beta1.ShootControlPlaneHealthy)
	return checker.CheckExtensionCondition(initial, reported, nil)
}

func TestGardenletDeploysMigratesRestoresAndDestroysTheControlPlane(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "controlplane", "local", map[string][]byte{"kubeconfig": seedFor(t).kubeconfig})
	ctx := sh.ctx
	// The last operation's type is checked without stopping the test, so that the steps
	// after a wrong one still run.
	soft := NewGomega(func(message string, _ ...int) { t.Helper(); t.Error(message) })

	// Create: the shoot's first reconcile.
	cp := sh.controlPlane(localControlPlaneConfig(1))
	g.Expect(cp.Deploy(ctx)).To(Succeed())
	g.Expect(cp.Wait(ctx)).To(Succeed(), sh.describeControlPlane)
	created := sh.expectControlPlaneHealthy(g)
	// Gardener's extension library admits no event after the controller removed the
	// operation annotation, so the create is the last operation until Gardener asks again.
	soft.Expect(created.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeCreate),
		"the create is the last operation, no reconcile follows unasked: %s", describe(created))
	g.Expect(created.Spec.InfrastructureProviderStatus.Raw).To(MatchJSON(sh.localInfrastructureStatus()))
	before := sh.controlPlaneObjects(g)
	g.Expect(before).To(HaveLen(3), "the ConfigMap, Deployment and Service are rendered into the shoot namespace")
	sh.expectRendered(g, cp, 1)

	// The workloads are never available here (envtest runs no kube-controller-manager, so
	// no pods): the ControlPlane says so in its ControlPlaneHealthy condition, which
	// gardenlet's care controller merges into the Shoot's.
	g.Eventually(func(g Gomega) {
		reported := sh.getControlPlane(g)
		condition := v1beta1helper.GetCondition(reported.Status.Conditions, gardencorev1beta1.ShootControlPlaneHealthy)
		g.Expect(condition).NotTo(BeNil(), "a ControlPlaneHealthy condition")
		g.Expect(condition.Status).To(BeElementOf(gardencorev1beta1.ConditionFalse, gardencorev1beta1.ConditionProgressing, gardencorev1beta1.ConditionUnknown))
		g.Expect(condition.Reason).NotTo(BeEmpty())
		g.Expect(condition.LastUpdateTime.IsZero()).To(BeFalse())
		g.Expect(condition.LastTransitionTime.IsZero()).To(BeFalse())
		shoot := shootControlPlaneHealthy(reported)
		g.Expect(shoot).NotTo(BeNil(), "gardenlet sees the ControlPlane unhealthy")
		g.Expect(shoot.Status).NotTo(Equal(gardencorev1beta1.ConditionTrue))
		g.Expect(shoot.Message).To(ContainSubstring(condition.Message))
	}).WithContext(ctx).WithTimeout(controlplane.DefaultTimeout).WithPolling(waitInterval).Should(Succeed(), sh.describeControlPlane)

	// A changed providerConfig (the shoot's controlPlaneConfig changed).
	cp = sh.controlPlane(localControlPlaneConfig(2))
	g.Expect(cp.Deploy(ctx)).To(Succeed())
	g.Expect(cp.Wait(ctx)).To(Succeed(), sh.describeControlPlane)
	changed := sh.expectControlPlaneHealthy(g)
	g.Expect(changed.Generation).To(BeNumerically(">", created.Generation), "the spec changed")
	g.Expect(changed.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeReconcile))
	sh.expectRendered(g, cp, 2)
	g.Expect(sh.controlPlaneObjects(g)).To(Equal(before), "the objects are changed in place, not recreated")

	// Migrate, as the source seed's gardenlet does: the seed objects go, the ControlPlane stays.
	g.Expect(cp.Migrate(ctx)).To(Succeed())
	g.Expect(cp.WaitMigrate(ctx)).To(Succeed(), sh.describeControlPlane)
	// WaitMigrate looks at the last operation only; the request is taken a moment later.
	g.Eventually(sh.expectControlPlaneHealthy).WithContext(ctx).WithTimeout(waitSevereThreshold).Should(Not(BeNil()))
	migrated := sh.getControlPlane(g)
	g.Expect(migrated.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeMigrate))
	g.Expect(migrated.Status.LastOperation.State).To(Equal(gardencorev1beta1.LastOperationStateSucceeded))
	g.Expect(sh.controlPlaneObjects(g)).To(BeEmpty(), "migrating removes the seed objects")

	// The ShootState, computed by gardenlet's code from the seed, carries what the
	// ControlPlane keeps in its status.
	shootState := sh.persistShootState(g)
	// Since v1.123 a ControlPlane has no purpose, and its entry none either.
	entries := v1beta1helper.ExtensionResourceStateList(shootState.Spec.Extensions)
	entry := entries.Get(gardenextensionsv1alpha1.ControlPlaneResource, &migrated.Name, nil)
	if migrated.Status.State == nil && len(migrated.Status.Resources) == 0 {
		t.Log("the migrated ControlPlane keeps no state")
		g.Expect(entry).To(BeNil(), "the ShootState has no entry for the ControlPlane: %s", toJSON(shootState.Spec.Extensions))
	} else {
		g.Expect(entry).NotTo(BeNil(), "the ShootState has an entry for the ControlPlane: %s", toJSON(shootState.Spec.Extensions))
		g.Expect(toJSON(entry.State)).To(MatchJSON(toJSON(migrated.Status.State)))
		g.Expect(entry.Resources).To(Equal(migrated.Status.Resources))
	}

	// The source seed deletes the migrated ControlPlane.
	g.Expect(cp.Destroy(ctx)).To(Succeed())
	g.Expect(cp.WaitCleanup(ctx)).To(Succeed(), sh.describeControlPlane)
	g.Expect(sh.controlPlaneObjects(g)).To(BeEmpty())

	// Restore from the ShootState, as the destination seed's gardenlet does in its restore phase.
	cp = sh.controlPlane(localControlPlaneConfig(2))
	g.Expect(cp.Restore(ctx, shootState)).To(Succeed())
	g.Expect(cp.Wait(ctx)).To(Succeed(), sh.describeControlPlane)
	restored := sh.expectControlPlaneHealthy(g)
	soft.Expect(restored.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeRestore),
		"the restore is the last operation, no reconcile follows unasked: %s", describe(restored))
	g.Expect(restored.UID).NotTo(Equal(migrated.UID), "a new ControlPlane")
	g.Expect(sh.controlPlaneObjects(g)).To(HaveLen(3), "restoring re-applies the seed objects")
	sh.expectRendered(g, cp, 2)

	// Delete, as the shoot's deletion flow does: the seed objects go with the ControlPlane.
	g.Expect(cp.Destroy(ctx)).To(Succeed())
	g.Expect(cp.WaitCleanup(ctx)).To(Succeed(), sh.describeControlPlane)
	err := sh.seed.client.Get(ctx, sh.key(), &gardenextensionsv1alpha1.ControlPlane{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ControlPlane is gone: %v", err)
	g.Expect(sh.controlPlaneObjects(g)).To(BeEmpty(), "deleting the ControlPlane removes the seed objects")
}
