package extension_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
)

const (
	namespace = "shoot--project--name"
	name      = "infra"
	finalizer = "extensions.gardener.cloud/test"
)

type infra = extensionsv1alpha1.Infrastructure

// fakeActuator records the calls the protocol makes, and does what a case tells it to.
type fakeActuator struct {
	calls    []string
	err      error
	upToDate bool
	// during runs inside an actuator call, to change the object as another writer would.
	during func(ctx context.Context, g Gomega, c client.Client)
	c      client.Client
	g      Gomega
}

func (a *fakeActuator) do(ctx context.Context, call string, req extension.Request[*infra], ensureFinalizer bool) error {
	a.calls = append(a.calls, call)
	if ensureFinalizer {
		if err := req.EnsureFinalizer(ctx); err != nil {
			return err
		}
	}
	if a.during != nil {
		a.during(ctx, a.g, a.c)
	}
	if a.err == nil {
		req.Object.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(`{"by":"` + call + `"}`)}
	}
	return a.err
}

func (a *fakeActuator) Reconcile(ctx context.Context, req extension.Request[*infra]) error {
	return a.do(ctx, "Reconcile", req, true)
}
func (a *fakeActuator) Delete(ctx context.Context, req extension.Request[*infra]) error {
	return a.do(ctx, "Delete", req, false)
}
func (a *fakeActuator) ForceDelete(ctx context.Context, req extension.Request[*infra]) error {
	return a.do(ctx, "ForceDelete", req, false)
}
func (a *fakeActuator) Migrate(ctx context.Context, req extension.Request[*infra]) error {
	return a.do(ctx, "Migrate", req, false)
}
func (a *fakeActuator) Restore(ctx context.Context, req extension.Request[*infra]) error {
	return a.do(ctx, "Restore", req, true)
}
func (a *fakeActuator) UpToDate(context.Context, extension.Request[*infra]) (bool, error) {
	a.calls = append(a.calls, "UpToDate")
	return a.upToDate, nil
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = extensionsv1alpha1.AddToScheme(scheme)
	return scheme
}

// object is an Infrastructure at generation 2, of type local unless a case changes it.
func object(change ...func(*infra)) *infra {
	obj := &infra{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 2, Annotations: map[string]string{}},
		Spec:       extensionsv1alpha1.InfrastructureSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}},
	}
	for _, c := range change {
		c(obj)
	}
	return obj
}

func annotated(operation string) func(*infra) {
	return func(o *infra) { o.Annotations[extension.AnnotationOperation] = operation }
}

func withFinalizer(o *infra) { o.Finalizers = append(o.Finalizers, finalizer) }

func deleting(o *infra) {
	withFinalizer(o)
	o.DeletionTimestamp = &metav1.Time{Time: time.Now()}
}

// progressing is the Ready condition of an operation under way.
func progressing(o *infra) {
	o.Status.Conditions = []extensionsv1alpha1.Condition{{Type: extension.ConditionReady, Status: extensionsv1alpha1.ConditionProgressing, Reason: extension.ReasonProcessing}}
}

func last(opType extensionsv1alpha1.LastOperationType, state extensionsv1alpha1.LastOperationState) func(*infra) {
	return func(o *infra) {
		o.Status.LastOperation = &extensionsv1alpha1.LastOperation{Type: opType, State: state, Progress: 100}
		if state == extensionsv1alpha1.LastOperationStateSucceeded {
			o.Status.ObservedGeneration = o.Generation
		}
	}
}

func cluster(shoot string) *extensionsv1alpha1.Cluster {
	return &extensionsv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: namespace},
		Spec:       extensionsv1alpha1.ClusterSpec{Shoot: runtime.RawExtension{Raw: []byte(shoot)}},
	}
}

type harness struct {
	client   client.Client
	actuator *fakeActuator
	recorder *events.FakeRecorder
	r        *extension.Reconciler[*infra]
}

func newHarness(t *testing.T, objects ...client.Object) *harness {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(newScheme()).WithObjects(objects...).WithStatusSubresource(&infra{}).Build()
	actuator := &fakeActuator{c: c}
	recorder := events.NewFakeRecorder(100)
	return &harness{client: c, actuator: actuator, recorder: recorder, r: &extension.Reconciler[*infra]{
		Kind: "Infrastructure", Finalizer: finalizer, Client: c, APIReader: c, Recorder: recorder,
		Actuator: actuator, NewObject: func() *infra { return &infra{} }, Types: []string{"local"},
	}}
}

func (h *harness) reconcile() (reconcile.Result, error) {
	return h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: namespace, Name: name}})
}

// get returns the object, nil once it is gone.
func (h *harness) get(g Gomega) *infra {
	obj := &infra{}
	err := h.client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return obj
}

func (h *harness) events() []string {
	var reasons []string
	for {
		select {
		case e := <-h.recorder.Events:
			fields := strings.Fields(e)
			reasons = append(reasons, fields[0]+" "+fields[1])
		default:
			return reasons
		}
	}
}

var errTransient = errors.New("the cloud is busy")

// TestOperations drives the protocol through each operation Gardener can ask for.
func TestOperations(t *testing.T) {
	invalid := extension.InvalidInput(extension.ReasonInvalid, "providerConfig.zones[0]: Invalid value: 42")
	type want struct {
		calls      []string
		gone       bool
		opType     extensionsv1alpha1.LastOperationType
		state      extensionsv1alpha1.LastOperationState
		progress   int32
		annotation string
		finalizer  bool
		events     []string
		terminal   bool
		err        bool
		// unchanged: the status is the one the object had.
		unchanged bool
	}
	cases := []struct {
		name     string
		obj      *infra
		cluster  *extensionsv1alpha1.Cluster
		err      error
		upToDate bool
		classes  []extensionsv1alpha1.ExtensionClass
		want     want
	}{{
		name: "a new object is created",
		obj:  object(),
		want: want{calls: []string{"Reconcile"}, opType: "Create", state: "Succeeded", progress: 100, finalizer: true,
			events: []string{"Normal CreateProcessing", "Normal CreateSucceeded"}},
	}, {
		name: "Gardener's reconcile request is taken",
		obj:  object(withFinalizer, annotated("reconcile"), last("Create", "Succeeded")),
		want: want{calls: []string{"Reconcile"}, opType: "Reconcile", state: "Succeeded", progress: 100, finalizer: true,
			events: []string{"Normal ReconcileProcessing", "Normal ReconcileSucceeded"}},
	}, {
		name: "a create that failed is a create again",
		obj:  object(withFinalizer, last("Create", "Error")),
		want: want{calls: []string{"Reconcile"}, opType: "Create", state: "Succeeded", progress: 100, finalizer: true,
			events: []string{"Normal CreateProcessing", "Normal CreateSucceeded"}},
	}, {
		name:     "an up-to-date object is left alone",
		obj:      object(withFinalizer, last("Reconcile", "Succeeded")),
		upToDate: true,
		want:     want{calls: []string{"UpToDate"}, finalizer: true, unchanged: true},
	}, {
		name: "a changed generation is reconciled without asking the actuator",
		obj:  object(withFinalizer, last("Reconcile", "Succeeded"), func(o *infra) { o.Status.ObservedGeneration = 1 }),
		want: want{calls: []string{"Reconcile"}, opType: "Reconcile", state: "Succeeded", progress: 100, finalizer: true,
			events: []string{"Normal ReconcileProcessing", "Normal ReconcileSucceeded"}},
	}, {
		name: "a transient failure errs half-way and is retried",
		obj:  object(withFinalizer, annotated("reconcile"), last("Create", "Succeeded")),
		err:  errTransient,
		want: want{calls: []string{"Reconcile"}, opType: "Reconcile", state: "Error", progress: 50, finalizer: true, err: true,
			events: []string{"Normal ReconcileProcessing", "Warning ReconcileError"}},
	}, {
		name: "invalid input fails terminally",
		obj:  object(),
		err:  invalid,
		want: want{calls: []string{"Reconcile"}, opType: "Create", state: "Failed", progress: 50, finalizer: true, err: true, terminal: true,
			events: []string{"Normal CreateProcessing", "Warning CreateFailed"}},
	}, {
		name: "a run under way is waited for without a failure, the progress it reached kept",
		obj:  object(withFinalizer, last("Create", "Processing"), progressing),
		err:  &extension.Error{Reason: "RunInProgress", RetryAfter: 10 * time.Second, Err: errTransient},
		want: want{calls: []string{"Reconcile"}, opType: "Create", state: "Processing", progress: 100, finalizer: true},
	}, {
		name: "a new operation starts from the beginning",
		obj:  object(withFinalizer, last("Create", "Error")),
		err:  &extension.Error{Reason: "RunInProgress", RetryAfter: 10 * time.Second, Err: errTransient},
		want: want{calls: []string{"Reconcile"}, opType: "Create", state: "Processing", progress: 1, finalizer: true,
			events: []string{"Normal CreateProcessing"}},
	}, {
		name: "migrate releases the object",
		obj:  object(withFinalizer, annotated("migrate"), last("Reconcile", "Succeeded")),
		want: want{calls: []string{"Migrate"}, opType: "Migrate", state: "Succeeded", progress: 100,
			events: []string{"Normal MigrateProcessing", "Normal MigrateSucceeded"}},
	}, {
		name: "migrate comes before deletion",
		obj:  object(deleting, annotated("migrate"), last("Reconcile", "Succeeded")),
		want: want{calls: []string{"Migrate"}, gone: true},
	}, {
		name: "a failed migrate keeps the annotation and the finalizer",
		obj:  object(withFinalizer, annotated("migrate"), last("Reconcile", "Succeeded")),
		err:  errTransient,
		want: want{calls: []string{"Migrate"}, opType: "Migrate", state: "Error", progress: 50, annotation: "migrate", finalizer: true, err: true,
			events: []string{"Normal MigrateProcessing", "Warning MigrateError"}},
	}, {
		name: "after a successful migrate a reconcile request is skipped",
		obj:  object(withFinalizer, annotated("reconcile"), last("Migrate", "Succeeded")),
		want: want{annotation: "reconcile", finalizer: true, unchanged: true},
	}, {
		name: "deletion after a successful migrate destroys nothing",
		obj:  object(deleting, last("Migrate", "Succeeded")),
		want: want{gone: true},
	}, {
		name: "deletion deletes and releases",
		obj:  object(deleting, last("Reconcile", "Succeeded")),
		want: want{calls: []string{"Delete"}, gone: true},
	}, {
		name: "a failed deletion keeps the finalizer",
		obj:  object(deleting, last("Reconcile", "Succeeded")),
		err:  errTransient,
		want: want{calls: []string{"Delete"}, opType: "Delete", state: "Error", progress: 50, finalizer: true, err: true,
			events: []string{"Normal DeleteProcessing", "Warning DeleteError"}},
	}, {
		name:    "a force-deleted shoot's object is forgotten, and an event says so",
		obj:     object(deleting, last("Reconcile", "Succeeded")),
		cluster: cluster(`{"metadata":{"deletionTimestamp":"2026-11-23T00:00:00Z","annotations":{"confirmation.gardener.cloud/force-deletion":"true"}}}`),
		want:    want{calls: []string{"ForceDelete"}, gone: true},
	}, {
		name:    "force deletion needs the shoot to be deleted",
		obj:     object(deleting, last("Reconcile", "Succeeded")),
		cluster: cluster(`{"metadata":{"annotations":{"confirmation.gardener.cloud/force-deletion":"true"}}}`),
		want:    want{calls: []string{"Delete"}, gone: true},
	}, {
		name: "an object waiting for its state is left alone",
		obj:  object(annotated("wait-for-state")),
		want: want{annotation: "wait-for-state", unchanged: true},
	}, {
		name: "restore takes over and then takes the annotation",
		obj:  object(annotated("restore"), last("Migrate", "Succeeded")),
		want: want{calls: []string{"Restore"}, opType: "Restore", state: "Succeeded", progress: 100, finalizer: true,
			events: []string{"Normal RestoreProcessing", "Normal RestoreSucceeded"}},
	}, {
		name: "a failed restore keeps the annotation",
		obj:  object(annotated("restore")),
		err:  errTransient,
		want: want{calls: []string{"Restore"}, opType: "Restore", state: "Error", progress: 50, annotation: "restore", finalizer: true, err: true,
			events: []string{"Normal RestoreProcessing", "Warning RestoreError"}},
	}, {
		name:    "a failed shoot is skipped",
		obj:     object(annotated("reconcile")),
		cluster: cluster(`{"status":{"lastOperation":{"state":"Failed"}}}`),
		want:    want{annotation: "reconcile", unchanged: true},
	}, {
		name:    "a shoot that is not failed is reconciled",
		obj:     object(),
		cluster: cluster(`{"status":{"lastOperation":{"state":"Error"}}}`),
		want: want{calls: []string{"Reconcile"}, opType: "Create", state: "Succeeded", progress: 100, finalizer: true,
			events: []string{"Normal CreateProcessing", "Normal CreateSucceeded"}},
	}, {
		name: "another type is left alone",
		obj:  object(func(o *infra) { o.Spec.Type = "aws" }),
		want: want{unchanged: true},
	}, {
		name: "another class is left alone",
		obj:  object(func(o *infra) { o.Spec.Class = ptr(extensionsv1alpha1.ExtensionClassSeed) }),
		want: want{unchanged: true},
	}, {
		name:    "a served class other than shoot is reconciled",
		obj:     object(func(o *infra) { o.Spec.Class = ptr(extensionsv1alpha1.ExtensionClassSeed) }),
		classes: []extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassSeed},
		want: want{calls: []string{"Reconcile"}, opType: "Create", state: "Succeeded", progress: 100, finalizer: true,
			events: []string{"Normal CreateProcessing", "Normal CreateSucceeded"}},
	}, {
		name:    "an object without class is not served when shoot is not",
		obj:     object(),
		classes: []extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassSeed},
		want:    want{unchanged: true},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objects := []client.Object{tc.obj.DeepCopy()}
			if tc.cluster != nil {
				objects = append(objects, tc.cluster)
			}
			h := newHarness(t, objects...)
			h.actuator.err, h.actuator.upToDate = tc.err, tc.upToDate
			h.r.Classes = tc.classes
			before := h.get(g)

			result, err := h.reconcile()

			g.Expect(h.actuator.calls).To(Equal(tc.want.calls))
			if tc.want.err {
				g.Expect(err).To(HaveOccurred())
				g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(Equal(tc.want.terminal), "terminal")
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			if tc.err != nil && asRetry(tc.err) > 0 {
				g.Expect(result.RequeueAfter).To(Equal(asRetry(tc.err)))
			}
			after := h.get(g)
			if tc.want.gone {
				g.Expect(after).To(BeNil(), "the object is released")
				return
			}
			g.Expect(after).NotTo(BeNil())
			g.Expect(after.Annotations[extension.AnnotationOperation]).To(Equal(tc.want.annotation), "the operation annotation")
			g.Expect(after.Finalizers).To(Equal(finalizers(tc.want.finalizer)), "the finalizer")
			g.Expect(h.events()).To(Equal(tc.want.events), "the events")
			if tc.want.unchanged {
				g.Expect(after.Status).To(Equal(before.Status))
				return
			}
			lastOp := after.Status.LastOperation
			g.Expect(lastOp).NotTo(BeNil())
			g.Expect(lastOp.Type).To(Equal(tc.want.opType))
			g.Expect(lastOp.State).To(Equal(tc.want.state))
			g.Expect(lastOp.Progress).To(Equal(tc.want.progress))
			ready := after.Status.Conditions[0]
			g.Expect(ready.Type).To(Equal(extension.ConditionReady))
			switch tc.want.state {
			case extensionsv1alpha1.LastOperationStateSucceeded:
				g.Expect(after.Status.LastError).To(BeNil())
				g.Expect(ready.Status).To(Equal(extensionsv1alpha1.ConditionTrue))
				g.Expect(after.Status.ProviderStatus).NotTo(BeNil(), "what the actuator set is written")
				if tc.want.opType != extensionsv1alpha1.LastOperationTypeMigrate {
					g.Expect(after.Status.ObservedGeneration).To(Equal(after.Generation))
				}
			case extensionsv1alpha1.LastOperationStateError, extensionsv1alpha1.LastOperationStateFailed:
				g.Expect(after.Status.LastError).NotTo(BeNil())
				g.Expect(after.Status.LastError.Description).To(Equal(tc.err.Error()))
				g.Expect(*after.Status.LastError.TaskID).To(Equal(string(tc.want.opType)))
				g.Expect(ready.Status).To(Equal(extensionsv1alpha1.ConditionFalse))
				g.Expect(after.Status.ObservedGeneration).To(Equal(before.Status.ObservedGeneration), "observedGeneration moves only on success")
				if tc.want.terminal {
					g.Expect(after.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
					g.Expect(ready.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
				}
			}
		})
	}
}

func asRetry(err error) time.Duration {
	var e *extension.Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

func finalizers(kept bool) []string {
	if kept {
		return []string{finalizer}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// TestForceDeletionSaysWhatWasLeft checks the event a force deletion leaves behind.
func TestForceDeletionSaysWhatWasLeft(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, object(deleting, last("Reconcile", "Succeeded")),
		cluster(`{"metadata":{"deletionTimestamp":"2026-11-23T00:00:00Z","annotations":{"confirmation.gardener.cloud/force-deletion":"true"}}}`))
	_, err := h.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	var forceDeleted string
	for {
		select {
		case e := <-h.recorder.Events:
			if strings.Contains(e, "ForceDeleted") {
				forceDeleted = e
			}
			continue
		default:
		}
		break
	}
	g.Expect(forceDeleted).To(HavePrefix("Warning ForceDeleted"))
	g.Expect(forceDeleted).To(ContainSubstring("left behind"))
}

// TestRequestsGardenerMakesDuringAnOperationStay checks that the annotation Gardener sets
// while an operation runs is never overwritten by the end of that operation.
func TestRequestsGardenerMakesDuringAnOperationStay(t *testing.T) {
	setAnnotation := func(value string) func(ctx context.Context, g Gomega, c client.Client) {
		return func(ctx context.Context, g Gomega, c client.Client) {
			obj := &infra{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)).To(Succeed())
			patch := client.MergeFrom(obj.DeepCopy())
			if obj.Annotations == nil {
				obj.Annotations = map[string]string{}
			}
			obj.Annotations[extension.AnnotationOperation] = value
			g.Expect(c.Patch(ctx, obj, patch)).To(Succeed())
		}
	}
	cases := []struct {
		name   string
		obj    *infra
		during string
		// want is the annotation after the operation.
		want string
	}{
		{"a migrate asked for during a reconcile", object(withFinalizer, annotated("reconcile"), last("Create", "Succeeded")), "migrate", "migrate"},
		{"a second reconcile asked for during a reconcile", object(withFinalizer, annotated("reconcile"), last("Create", "Succeeded")), "reconcile", "reconcile"},
		{"a restore asked for during a migrate", object(withFinalizer, annotated("migrate"), last("Reconcile", "Succeeded")), "restore", "restore"},
		{"a migrate asked for during a restore", object(annotated("restore")), "migrate", "migrate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, tc.obj)
			h.actuator.during, h.actuator.g = setAnnotation(tc.during), g
			_, err := h.reconcile()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h.get(g).Annotations[extension.AnnotationOperation]).To(Equal(tc.want))
		})
	}
}

// TestFinalizersOfOthersStay checks that a finalizer another controller adds during an
// operation survives the removal of ours.
func TestFinalizersOfOthersStay(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, object(withFinalizer, annotated("migrate"), last("Reconcile", "Succeeded")))
	h.actuator.g = g
	h.actuator.during = func(ctx context.Context, g Gomega, c client.Client) {
		obj := &infra{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)).To(Succeed())
		patch := client.MergeFrom(obj.DeepCopy())
		obj.Finalizers = append(obj.Finalizers, "example.com/other")
		g.Expect(c.Patch(ctx, obj, patch)).To(Succeed())
	}
	_, err := h.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.get(g).Finalizers).To(Equal([]string{"example.com/other"}))
}

// TestConditionsOfOtherWritersStay races another condition writer (a health check) with
// an operation: the condition it changed while the operation ran is not written back as
// the operation had read it.
func TestConditionsOfOtherWritersStay(t *testing.T) {
	g := NewWithT(t)
	health := func(status extensionsv1alpha1.ConditionStatus) extensionsv1alpha1.Condition {
		return extensionsv1alpha1.Condition{Type: "ControlPlaneHealthy", Status: status, Reason: "HealthCheck" + string(status)}
	}
	h := newHarness(t, object(withFinalizer, annotated("reconcile"), last("Reconcile", "Succeeded"), func(o *infra) {
		o.Status.Conditions = []extensionsv1alpha1.Condition{health(extensionsv1alpha1.ConditionFalse)}
	}))
	h.actuator.g = g
	h.actuator.during = func(ctx context.Context, g Gomega, c client.Client) {
		obj := &infra{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)).To(Succeed())
		patch := client.MergeFromWithOptions(obj.DeepCopy(), client.MergeFromWithOptimisticLock{})
		extension.SetCondition(&obj.Status.DefaultStatus, health(extensionsv1alpha1.ConditionTrue))
		g.Expect(c.Status().Patch(ctx, obj, patch)).To(Succeed())
	}
	_, err := h.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	status := h.get(g).Status
	g.Expect(extension.FindCondition(&status.DefaultStatus, "ControlPlaneHealthy")).To(HaveField("Status", extensionsv1alpha1.ConditionTrue), "the other writer's change stays")
	g.Expect(extension.FindCondition(&status.DefaultStatus, extension.ConditionReady)).To(HaveField("Status", extensionsv1alpha1.ConditionTrue), "the operation's own condition is written")
}

// TestHeartbeat checks that the Lease gardenlet reads is created and then renewed.
func TestHeartbeat(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(newScheme()).Build()
	heartbeat := &extension.Heartbeat{Client: c, Namespace: "extension-terraseed", Holder: "terraseed", Interval: 50 * time.Millisecond}
	g.Expect(heartbeat.NeedLeaderElection()).To(BeTrue())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- heartbeat.Start(ctx) }()

	var first time.Time
	g.Eventually(func(g Gomega) {
		lease := lease(g, c)
		g.Expect(*lease.Spec.HolderIdentity).To(Equal("terraseed"))
		first = lease.Spec.RenewTime.Time
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(lease(g, c).Spec.RenewTime.Time).To(BeTemporally(">", first))
	}).Should(Succeed())
	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
}

func lease(g Gomega, c client.Client) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "extension-terraseed", Name: extension.HeartbeatLeaseName}, l)).To(Succeed())
	return l
}
