package compat_test

import (
	"context"
	"sync"
	"testing"
	"time"

	v1beta1helper "github.com/gardener/gardener/pkg/api/core/v1beta1/helper"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	"github.com/gardener/gardener/pkg/utils/gardener/shootstate"
	"github.com/gardener/gardener/pkg/utils/kubernetes/health"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// These tests drive terraseed's controller with gardenlet's own code at the version this
// module requires: the Infrastructure component (pkg/component/extensions/infrastructure),
// its health check and the ShootState computation, each called as gardenlet's shoot
// reconcile, migrate and delete flows call them.

// persistShootState computes the ShootState from the seed's extension objects as
// gardenlet's migrate flow does, into a garden cluster of its own, and returns it.
func (sh *shootInSeed) persistShootState(g Gomega) *gardencorev1beta1.ShootState {
	garden := fake.NewClientBuilder().WithScheme(gardenScheme()).Build()
	g.Expect(shootstate.Deploy(sh.ctx, clock.RealClock{}, garden, sh.seed.client, sh.shoot, sh.namespace, false)).To(Succeed())
	shootState := &gardencorev1beta1.ShootState{}
	g.Expect(garden.Get(sh.ctx, client.ObjectKeyFromObject(sh.shoot), shootState)).To(Succeed())
	return shootState
}

func TestGardenletDeploysMigratesRestoresAndDestroys(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "lifecycle", "local", map[string][]byte{"kubeconfig": seedFor(t).kubeconfig})
	ctx := sh.ctx
	oneZone := localConfig("10.250.0.0/19")
	twoZones := localConfig("10.250.0.0/19", "10.250.32.0/19")

	// Create: the shoot's first reconcile, with the task to deploy the infrastructure.
	infra := sh.component(oneZone, true)
	g.Expect(infra.Deploy(ctx)).To(Succeed())
	g.Expect(infra.Wait(ctx)).To(Succeed(), sh.describe)
	created := sh.expectHealthy(g)
	g.Expect(created.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeCreate))
	g.Expect(infra.NodesCIDRs()).To(Equal([]string{"10.250.0.0/16"}), "the shoot's nodes CIDR, as gardenlet reads it")
	status := decodeProviderStatus(g, infra.ProviderStatus())
	g.Expect(status).To(HaveKeyWithValue("namespace", sh.targetNamespace()))
	g.Expect(status).To(HaveKeyWithValue("zones", HaveLen(1)))
	before := sh.realObjects(g)
	g.Expect(before).To(And(HaveKey("namespace"), HaveKey("networkpolicy/deny-all"), HaveKey("networkpolicy/zone-0"),
		HaveKey("networkpolicy/shoot-networks"), HaveKey("secret/ssh-publickey")))

	// A changed providerConfig (gardener-apiserver adds the task to deploy the
	// infrastructure when the shoot's infrastructureConfig changes).
	infra = sh.component(twoZones, true)
	g.Expect(infra.Deploy(ctx)).To(Succeed())
	g.Expect(infra.Wait(ctx)).To(Succeed(), sh.describe)
	changed := sh.expectHealthy(g)
	g.Expect(changed.Generation).To(BeNumerically(">", created.Generation), "the spec changed")
	g.Expect(changed.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeReconcile))
	g.Expect(decodeProviderStatus(g, infra.ProviderStatus())).To(HaveKeyWithValue("zones", HaveLen(2)))
	zone1 := sh.networkPolicy(g, "zone-1")
	g.Expect(zone1).NotTo(BeNil(), "the new zone's NetworkPolicy exists")
	g.Expect(zone1.Spec.Ingress[0].From[0].IPBlock.CIDR).To(Equal("10.250.32.0/19"))
	after := sh.realObjects(g)
	for name, uid := range before {
		g.Expect(after).To(HaveKeyWithValue(name, uid), "%s is kept, not recreated", name)
	}

	// An unchanged reconcile without the task: nothing to do, nothing done.
	infra = sh.component(twoZones, false)
	g.Expect(infra.Deploy(ctx)).To(Succeed())
	g.Expect(infra.Wait(ctx)).To(Succeed(), sh.describe)
	unchanged := sh.expectHealthy(g)
	g.Expect(unchanged.Generation).To(Equal(changed.Generation))
	g.Expect(unchanged.Status.LastOperation).To(Equal(changed.Status.LastOperation), "no operation ran")

	// An unchanged reconcile with the task: Gardener asks for a reconcile and waits for it.
	infra = sh.component(twoZones, true)
	g.Expect(infra.Deploy(ctx)).To(Succeed())
	g.Expect(infra.Wait(ctx)).To(Succeed(), sh.describe)
	forced := sh.expectHealthy(g)
	g.Expect(forced.Generation).To(Equal(changed.Generation))
	g.Expect(forced.Annotations[v1beta1constants.GardenerTimestamp]).NotTo(Equal(changed.Annotations[v1beta1constants.GardenerTimestamp]), "a reconcile was asked for")
	g.Expect(forced.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeReconcile))
	g.Expect(forced.Status.LastOperation.LastUpdateTime.Time).To(BeTemporally(">=", changed.Status.LastOperation.LastUpdateTime.Time))
	g.Expect(sh.realObjects(g)).To(Equal(after), "a reconcile of an unchanged spec recreates nothing")

	// Migrate, as the source seed's gardenlet does.
	infra = sh.component(twoZones, false)
	g.Expect(infra.Migrate(ctx)).To(Succeed())
	g.Expect(infra.WaitMigrate(ctx)).To(Succeed(), sh.describe)
	migrated := sh.get(g)
	g.Expect(migrated.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeMigrate))
	g.Expect(migrated.Status.LastOperation.State).To(Equal(gardencorev1beta1.LastOperationStateSucceeded))
	migratedState := decodeInfrastructureState(g, migrated.Status.State)
	g.Expect(migratedState.addresses()).To(ContainElements("kubectl_manifest.namespace", "kubectl_manifest.deny_all",
		"kubectl_manifest.zone_0", "kubectl_manifest.zone_1", "kubectl_manifest.shoot_networks", "kubectl_manifest.ssh_public_key"))
	g.Expect(sh.realObjects(g)).To(Equal(after), "migrating destroys nothing")

	// The ShootState, computed by gardenlet's code from the seed, carries the state.
	shootState := sh.persistShootState(g)
	entry := infrastructureEntry(shootState, sh.shoot.Name)
	g.Expect(entry).NotTo(BeNil(), "the ShootState has an entry for the Infrastructure: %s", toJSON(shootState.Spec.Extensions))
	g.Expect(entry.State).NotTo(BeNil())
	g.Expect(entry.State.Raw).To(MatchJSON(migrated.Status.State.Raw))

	// The source seed deletes the migrated Infrastructure: nothing is destroyed.
	g.Expect(infra.Destroy(ctx)).To(Succeed())
	g.Expect(infra.WaitCleanup(ctx)).To(Succeed(), sh.describe)
	g.Expect(sh.realObjects(g)).To(Equal(after), "deleting a migrated Infrastructure destroys nothing")

	// Restore from the ShootState, as the destination seed's gardenlet does in its restore phase.
	infra = sh.component(twoZones, true)
	g.Expect(infra.Restore(ctx, shootState)).To(Succeed())
	g.Expect(infra.Wait(ctx)).To(Succeed(), sh.describe)
	restored := sh.expectHealthy(g)
	g.Expect(restored.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeRestore))
	g.Expect(restored.Status.ProviderStatus.Raw).To(MatchJSON(changed.Status.ProviderStatus.Raw))
	g.Expect(infra.NodesCIDRs()).To(Equal([]string{"10.250.0.0/16"}))
	g.Expect(sh.realObjects(g)).To(Equal(after), "restoring recreates nothing")

	// Delete, as the shoot's deletion flow does: everything is destroyed.
	g.Expect(infra.Destroy(ctx)).To(Succeed())
	g.Expect(infra.WaitCleanup(ctx)).To(Succeed(), sh.describe)
	for _, name := range []string{"deny-all", "zone-0", "zone-1", "shoot-networks"} {
		g.Expect(sh.networkPolicy(g, name)).To(BeNil(), "NetworkPolicy %s is destroyed", name)
	}
	namespace := &corev1.Namespace{}
	if err := sh.seed.client.Get(ctx, client.ObjectKey{Name: sh.targetNamespace()}, namespace); !apierrors.IsNotFound(err) {
		// envtest runs no namespace controller: a deleted namespace stays terminating.
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(namespace.DeletionTimestamp).NotTo(BeNil(), "the namespace is destroyed")
	}
}

func TestGardenletSeesAnInvalidProviderConfigFailFast(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "invalid", "local", map[string][]byte{"kubeconfig": seedFor(t).kubeconfig})
	ctx := sh.ctx

	// The zone's workers network lies outside the network.
	infra := sh.component(localConfig("10.251.0.0/19"), true)
	g.Expect(infra.Deploy(ctx)).To(Succeed())
	start := time.Now()
	err := infra.Wait(ctx)
	elapsed := time.Since(start)
	g.Expect(err).To(HaveOccurred(), sh.describe)
	t.Logf("Wait returned after %s: %v", elapsed.Round(time.Second), err)
	g.Expect(elapsed).To(BeNumerically("<", 2*time.Minute),
		"Wait gives up once the error is severe (after %s), long before its timeout (%s)", waitSevereThreshold, waitTimeout)
	g.Expect(v1beta1helper.ExtractErrorCodes(err)).To(ContainElement(gardencorev1beta1.ErrorConfigurationProblem), "the codes of Wait's error")

	failed := sh.get(g)
	g.Expect(failed.Status.LastError).NotTo(BeNil(), describe(failed))
	g.Expect(failed.Status.LastError.Codes).To(ContainElement(gardencorev1beta1.ErrorConfigurationProblem))
	g.Expect(failed.Status.LastError.Description).To(ContainSubstring("providerConfig.networks.zones[0].workers"))
	g.Expect(failed.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeCreate))
	g.Expect(failed.Status.LastOperation.State).To(BeElementOf(gardencorev1beta1.LastOperationStateError, gardencorev1beta1.LastOperationStateFailed))
	g.Expect(health.CheckExtensionObject(failed)).To(MatchError(ContainSubstring("providerConfig.networks.zones[0].workers")))
	g.Expect(sh.stateConfigMap(g)).To(BeNil(), "an invalid Infrastructure never reaches terraform")

	// A shoot whose infrastructure never came up is deleted.
	g.Expect(infra.Destroy(ctx)).To(Succeed())
	g.Expect(infra.WaitCleanup(ctx)).To(Succeed(), sh.describe)
}

func TestGardenletMigratesDuringASlowApply(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "slow", "slow", map[string][]byte{"token": []byte("secret-token")})
	// The apply takes 20 s and more; the migration after it must not take Gardener's 10
	// minutes to come, or to fail.
	sh.waitTimeout = 3 * time.Minute
	ctx := sh.ctx

	infra := sh.component(`{"seconds":20}`, true)
	g.Expect(infra.Deploy(ctx)).To(Succeed())
	// The apply is under way once its run owns the state object.
	g.Eventually(func(g Gomega) {
		current := sh.get(g)
		g.Expect(current.Status.LastOperation).NotTo(BeNil())
		g.Expect(current.Status.LastOperation.State).To(Equal(gardencorev1beta1.LastOperationStateProcessing))
		cm := sh.stateConfigMap(g)
		g.Expect(cm).NotTo(BeNil())
		g.Expect(cm.Finalizers).To(ContainElement(runFinalizer))
	}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), sh.describe)

	// Record the newest state terraform writes until the run objects are gone.
	watcher := watchState(t, sh)

	infra = sh.component(`{"seconds":20}`, false)
	g.Expect(infra.Migrate(ctx)).To(Succeed())
	g.Expect(sh.get(g).Status.LastOperation.State).To(Equal(gardencorev1beta1.LastOperationStateProcessing), "the migration is asked for while the apply runs")
	g.Expect(infra.WaitMigrate(ctx)).To(Succeed(), sh.describe)
	migrated := sh.get(g)
	g.Expect(migrated.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeMigrate))
	g.Expect(migrated.Status.LastOperation.State).To(Equal(gardencorev1beta1.LastOperationStateSucceeded))
	kept := decodeInfrastructureState(g, migrated.Status.State)

	// The run ends and releases the state object.
	g.Eventually(sh.stateConfigMap).WithContext(ctx).WithTimeout(3*time.Minute).Should(BeNil(), "the state object is released")
	seen := watcher.stop()
	g.Expect(seen.Lineage).NotTo(BeEmpty(), "the run wrote a state")
	g.Expect(kept.Lineage).To(Equal(seen.Lineage), "the kept state is the run's")
	g.Expect(kept.Serial).To(BeNumerically(">=", seen.Serial), "the kept state is the newest the run wrote")
	g.Expect(kept.addresses()).To(ContainElements(seen.addresses()), "every resource terraform recorded is kept")

	// What the run ends with does not undo the migration.
	final := sh.get(g)
	g.Expect(final.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeMigrate), describe(final))
	g.Expect(final.Status.State.Raw).To(MatchJSON(migrated.Status.State.Raw))

	// The source seed deletes the migrated Infrastructure.
	g.Expect(infra.Destroy(ctx)).To(Succeed())
	g.Expect(infra.WaitCleanup(ctx)).To(Succeed(), sh.describe)
}

func TestGardenletShootStateAfterAReconcileHoldsTheTerraformState(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "snapshot", "local", map[string][]byte{"kubeconfig": seedFor(t).kubeconfig})
	ctx := sh.ctx

	infra := sh.component(localConfig("10.250.0.0/19"), true)
	g.Expect(infra.Deploy(ctx)).To(Succeed())
	g.Expect(infra.Wait(ctx)).To(Succeed(), sh.describe)
	reconciled := sh.expectHealthy(g)

	// gardenlet persists the ShootState before it migrates the Infrastructure:
	// the state must be in the Infrastructure's status after every reconcile.
	shootState := sh.persistShootState(g)
	entry := infrastructureEntry(shootState, sh.shoot.Name)
	g.Expect(entry).NotTo(BeNil(), "the ShootState has an entry for the Infrastructure; its extensions: %s; %s",
		toJSON(shootState.Spec.Extensions), describe(reconciled))
	state := decodeInfrastructureState(g, entry.State)
	g.Expect(state.addresses()).To(ContainElements("kubectl_manifest.namespace", "kubectl_manifest.deny_all",
		"kubectl_manifest.zone_0", "kubectl_manifest.shoot_networks", "kubectl_manifest.ssh_public_key"))
	cm := sh.stateConfigMap(g)
	g.Expect(cm).NotTo(BeNil())
	stored := parseTerraformState(g, []byte(cm.Data[tfstateKey]))
	g.Expect(state.Lineage).To(Equal(stored.Lineage), "the state of the Infrastructure's runs")
	g.Expect(state.Serial).To(Equal(stored.Serial), "the newest state")

	g.Expect(infra.Destroy(ctx)).To(Succeed())
	g.Expect(infra.WaitCleanup(ctx)).To(Succeed(), sh.describe)
}

// stateWatcher polls the state object of a shoot's runs and keeps the newest state in it.
type stateWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	newest terraformState
}

func watchState(t *testing.T, sh *shootInSeed) *stateWatcher {
	ctx, cancel := context.WithCancel(sh.ctx)
	w := &stateWatcher{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { w.stop() })
	go func() {
		defer close(w.done)
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for {
			w.sample(sh)
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return w
}

func (w *stateWatcher) sample(sh *shootInSeed) {
	cm := &corev1.ConfigMap{}
	if err := sh.seed.client.Get(sh.ctx, sh.stateKey(), cm); err != nil {
		return
	}
	data := cm.Data[tfstateKey]
	if data == "" {
		return
	}
	state, err := readTerraformState([]byte(data))
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if state.Serial >= w.newest.Serial {
		w.newest = state
	}
}

// stop ends the polling and returns the newest state seen.
func (w *stateWatcher) stop() terraformState {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.newest
}
