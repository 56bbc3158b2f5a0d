package kinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// countedRuns is the local executor, counting the runs it is given.
type countedRuns struct {
	*executor.LocalExecutor
	runs *atomic.Int64
}

func (e countedRuns) Run(ctx context.Context, req run.Request) (*run.Result, error) {
	e.runs.Add(1)
	return e.LocalExecutor.Run(ctx, req)
}

// storingIn keeps the states in storage (--state-storage) and counts the runs in runs.
func storingIn(storage state.Storage, runs *atomic.Int64) actuatorOption {
	return func(a *controllerSetup) {
		local := a.Executor.(*executor.LocalExecutor)
		a.State.Storage, local.State.Storage = storage, storage
		a.Executor = countedRuns{LocalExecutor: local, runs: runs}
	}
}

func stateObjects(s *shoot, storage state.Storage) state.RunObjects {
	return state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}, Options: state.Options{Storage: storage}}
}

// stateKinds says which kinds of object hold the state of s: "ConfigMap", "Secret".
func stateKinds(g Gomega, s *shoot) []string {
	var kinds []string
	key := client.ObjectKey{Namespace: s.namespace, Name: stateObjects(s, "").StateName()}
	for _, storage := range state.Storages {
		err := env.Client.Get(context.Background(), key, storage.Object())
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		kinds = append(kinds, storage.Kind())
	}
	return kinds
}

// With the state in Secrets a local Infrastructure is created, changed and deleted; no
// ConfigMap ever holds its state, and neither its status, its events nor the controller's
// log: the state's lineage and the UIDs terraform recorded of the objects it created
// appear nowhere but in the Secret.
func TestLifecycleWithTheStateInSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	log := &testenv.SyncBuffer{}
	var runs atomic.Int64
	startControllerLogging(t, s.namespace, workDir(t), env.Config, 2, zap.New(zap.WriteTo(log), zap.Level(zapcore.DebugLevel)), storingIn(state.StorageSecret, &runs))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	expectNoStateInStatus(g, infra)
	g.Expect(stateKinds(g, s)).To(Equal([]string{"Secret"}))
	stored, err := stateObjects(s, state.StorageSecret).ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	uids := realObjects(g, s)
	g.Expect(uids).To(HaveKey("namespace"))

	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Spec.ProviderConfig = testenv.LocalProviderConfig("10.250.0.0/19", "10.250.32.0/19")
	})
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.ObservedGeneration).To(Equal(current.Generation))
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
		names, _, err := testenv.StateItems(mustReadState(g, s))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names).To(ContainElement("zone-1"))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Expect(stateKinds(g, s)).To(Equal([]string{"Secret"}))
	infra = s.get(g)
	expectNoStateInStatus(g, infra)
	changed := mustReadState(g, s)
	var meta struct{ Lineage string }
	g.Expect(json.Unmarshal(changed, &meta)).To(Succeed())
	g.Expect(meta.Lineage).NotTo(BeEmpty())
	secretOnly := []string{meta.Lineage}
	for _, uid := range realObjects(g, s) {
		g.Expect(string(changed)).To(ContainSubstring(string(uid)), "terraform records the UIDs of what it created")
		secretOnly = append(secretOnly, string(uid))
	}
	g.Expect(string(stored)).To(ContainSubstring(meta.Lineage))

	status, err := json.Marshal(infra)
	g.Expect(err).NotTo(HaveOccurred())
	events := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, events, client.InNamespace(s.namespace))).To(Succeed())
	newEvents := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, newEvents, client.InNamespace(s.namespace))).To(Succeed())
	g.Expect(len(events.Items)+len(newEvents.Items)).To(BeNumerically(">", 0), "the operations left events to look at")
	eventText, err := json.Marshal([]any{events.Items, newEvents.Items})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(log.String()).To(ContainSubstring(s.infra.Name), "the controller's log was captured")
	for i, secret := range secretOnly {
		// The status keeps the index, which names the state's lineage and the resources'
		// import IDs only.
		if i > 0 {
			g.Expect(string(status)).NotTo(ContainSubstring(secret), "the Infrastructure")
		}
		g.Expect(string(eventText)).NotTo(ContainSubstring(secret), "the events")
		g.Expect(log.String()).NotTo(ContainSubstring(secret), "the controller's log")
	}

	// The history of the states is kept in a Secret too, and read back by the state command.
	history := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: stateObjects(s, "").HistoryName()}, history)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: stateObjects(s, "").HistoryName()}, &corev1.ConfigMap{})).To(Satisfy(apierrors.IsNotFound))
	entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2), "the create's state and the change's")
	g.Expect(entries[0].Lineage).To(Equal(meta.Lineage))

	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(stateKinds(g, s)).To(BeEmpty())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(history), history)).To(Satisfy(apierrors.IsNotFound), "the history goes with the state")
	assertRunObjectsGone(g, s)
	g.Expect(runs.Load()).To(BeNumerically(">=", 3), "create, change and delete each ran terraform")
}

func mustReadState(g Gomega, s *shoot) []byte {
	stored, err := stateObjects(s, state.StorageSecret).ReadState(context.Background(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	return stored
}

// A controller restarted with the other --state-storage moves the states of 20
// Infrastructures into the other kind of object and back, without a terraform run:
// serials, lineages and resources unchanged, and a reconcile after plans no change.
func TestStatesMoveBetweenConfigMapsAndSecretsWithoutARun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	secret := &corev1.Secret{}
	secret.Namespace, secret.Name = ns, "cloudprovider"
	secret.Data = map[string][]byte{"kubeconfig": adminKubeconfig(t)}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	var shoots []*shoot
	for i := range 20 {
		shoots = append(shoots, newShootIn(ns, fmt.Sprintf("infra-%02d", i), "10.250.0.0/19"))
	}
	dir := workDir(t)
	var runs atomic.Int64
	c := startControllerWith(t, ns, dir, env.Config, 5, storingIn(state.StorageConfigMap, &runs))
	for _, s := range shoots {
		g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	}
	for _, s := range shoots {
		s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	}
	c.stop()
	before := map[string][]byte{}
	for _, s := range shoots {
		g.Expect(stateKinds(g, s)).To(Equal([]string{"ConfigMap"}))
		before[s.infra.Name] = mustReadState(g, s)
		names, _, err := testenv.StateItems(before[s.infra.Name])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names).NotTo(BeEmpty())
	}

	for _, to := range []struct {
		storage state.Storage
		kind    string
	}{{state.StorageSecret, "Secret"}, {state.StorageConfigMap, "ConfigMap"}} {
		runs.Store(0)
		c := startControllerWith(t, ns, dir, env.Config, 5, storingIn(to.storage, &runs))
		for _, s := range shoots {
			g.Eventually(func(g Gomega) {
				g.Expect(stateKinds(g, s)).To(Equal([]string{to.kind}))
				main := stateObjects(s, to.storage).Storage.Object()
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: stateObjects(s, "").StateName()}, main)).To(Succeed())
				g.Expect(main.GetAnnotations()).NotTo(HaveKey(state.AnnotationMovedFrom), "the move finished")
				history := to.storage.Object()
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: stateObjects(s, "").HistoryName()}, history)).To(Succeed(), "the history moves with the state")
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: stateObjects(s, "").HistoryName()}, to.storage.Other().Object())).To(Satisfy(apierrors.IsNotFound))
			}).WithTimeout(2*time.Minute).Should(Succeed(), s.infra.Name)
			// The state itself, byte for byte: serial, lineage and every resource.
			g.Expect(mustReadState(g, s)).To(Equal(before[s.infra.Name]), s.infra.Name)
		}
		c.stop()
		g.Expect(runs.Load()).To(BeZero(), "no terraform run while the states moved into %ss", to.kind)
	}

	// A reconcile after the moves plans no change: terraform finds every resource.
	runs.Store(0)
	startControllerWith(t, ns, dir, env.Config, 5, storingIn(state.StorageConfigMap, &runs))
	var wg sync.WaitGroup
	for _, s := range shoots[:5] {
		wg.Go(func() { annotate(g, s, extension.OperationReconcile) })
	}
	wg.Wait()
	for _, s := range shoots[:5] {
		g.Eventually(func(g Gomega) {
			current := s.get(g)
			g.Expect(current.Annotations).NotTo(HaveKey(extension.AnnotationOperation))
			// The request is taken before the reconcile is marked Processing: the create's
			// success shows meanwhile.
			g.Expect(current.Status.LastOperation.Type).To(Equal(extensionsv1alpha1.LastOperationTypeReconcile))
			g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
			g.Expect(condition(current, kinds.ConditionLastPlan).Message).To(appliedPlan("0 to add, 0 to change, 0 to replace, 0 to destroy"))
		}).WithTimeout(3*time.Minute).Should(Succeed(), s.infra.Name)
	}
	g.Expect(runs.Load()).To(BeNumerically(">=", 5))
}

// expectNoStateInStatus fails when the status holds a terraform state: with Secret storage
// it holds the resources' index alone, IDs that find them again should the state be lost.
func expectNoStateInStatus(g Gomega, infra *extensionsv1alpha1.Infrastructure) {
	g.Expect(infra.Status.State).NotTo(BeNil(), "the index is kept in the status")
	var kept struct {
		TerraformState []byte          `json:"terraformState"`
		Index          json.RawMessage `json:"index"`
	}
	g.Expect(json.Unmarshal(infra.Status.State.Raw, &kept)).To(Succeed())
	g.Expect(kept.TerraformState).To(BeEmpty(), "a state kept in Secrets stays out of the status")
	g.Expect(kept.Index).NotTo(BeNil())
}
