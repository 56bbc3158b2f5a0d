package chart

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/terraform/state"
)

// The runs of a namespace share the run pods' ServiceAccount and its Role, which names
// every run's objects. Tried with the token the controller requests for a run pod, bound
// to the pod, against the chart's policies: a pod of run A writes A's configuration
// (its progress and plan), A's state and its parts, and is refused B's, by name; and a
// token of the run pods' ServiceAccount bound to no pod writes nothing.
func TestARunPodWritesItsOwnRunsObjectsOnly(t *testing.T) {
	for _, storage := range []state.Storage{state.StorageConfigMap, state.StorageSecret} {
		t.Run(string(storage), func(t *testing.T) { testOwnRunObjects(t, storage) })
	}
}

func testOwnRunObjects(t *testing.T, storage state.Storage) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	installRenamed(t, "own-run-", release)
	shoot := env.LabelledNamespace(t, shootLabels)
	controller := impersonate(t, release, "terraseed")
	e := &executor.PodExecutor{Client: controller, ServiceAccountName: "terraseed-terraformer", State: state.Options{Storage: storage}}
	a := run.ID{Namespace: shoot, Name: "a", Purpose: run.PurposeInfra}
	b := run.ID{Namespace: shoot, Name: "b", Purpose: run.PurposeInfra}
	for _, id := range []run.ID{a, b} {
		g.Expect(e.EnsureServiceAccount(ctx, id)).To(Succeed())
		config := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: id.ConfigName()}, Data: map[string]string{"main.tf": "# " + id.Name}}
		g.Expect(env.Client.Create(ctx, config)).To(Succeed())
	}
	asA, asB := runPodClient(t, release, a), runPodClient(t, release, b)
	refused := "run pod a.infra.tf-run writes only the objects of its own run (a.infra.tf-config, a.infra.tf-state and its parts), not "

	// In force once the API server loaded it.
	g.Eventually(func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: b.ConfigName()}}
		return asA.Patch(ctx, probe, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"probe":"a"}}}`)), client.DryRunAll)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring(refused + "ConfigMap " + b.ConfigName())))

	// The reports the executor trusts: each pod its own.
	progress := &run.Progress{Command: "apply", Phase: "applying", Creating: []string{"aws_vpc.vpc"}}
	summary := &plan.Summary{Changes: []plan.Change{{Address: "aws_vpc.vpc", Type: "aws_vpc", Action: "create"}}}
	g.Expect(report.Annotations{Client: asA, ID: a}.Write(ctx, report.Report{Progress: progress, Plan: summary})).To(Succeed())
	g.Expect(report.Annotations{Client: asB, ID: b}.Write(ctx, report.Report{Progress: &run.Progress{Command: "apply", Phase: "planning"}})).To(Succeed())
	g.Expect(report.Annotations{Client: asA, ID: b}.Write(ctx, report.Report{Progress: progress})).To(MatchError(ContainSubstring(refused+"ConfigMap "+b.ConfigName())), "B's progress")
	g.Expect(report.Annotations{Client: asA, ID: b}.Write(ctx, report.Report{Plan: summary})).To(MatchError(ContainSubstring(refused+"ConfigMap "+b.ConfigName())), "B's plan")
	g.Expect(report.Annotations{Client: asA, ID: b}.Clear(ctx)).To(MatchError(ContainSubstring(refused+"ConfigMap "+b.ConfigName())), "B's report cleared")
	bConfig := &corev1.ConfigMap{}
	g.Expect(asA.Get(ctx, client.ObjectKey{Namespace: shoot, Name: b.ConfigName()}, bConfig)).To(Succeed())
	bConfig.Data["main.tf"] = "# rewritten by a"
	g.Expect(asA.Update(ctx, bConfig)).To(MatchError(ContainSubstring(refused+"ConfigMap "+b.ConfigName())), "B's configuration")
	written, err := report.Annotations{Client: env.Client, ID: b}.Read(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written.Progress).To(HaveValue(HaveField("Phase", "planning")), "B's own report, untouched")
	g.Expect(written.Plan).To(BeNil())

	// The states, split into parts as the run pods save them: B's is refused to A, its
	// object, its parts and their deletion.
	stores := map[run.ID]*state.Store{}
	for id, c := range map[run.ID]client.Client{a: asA, b: asB} {
		store := state.RunObjects{ID: id, Options: state.Options{Storage: storage}}.Store(c)
		store.Limit = 16 << 10
		_, err := store.Claim(ctx)
		g.Expect(err).NotTo(HaveOccurred(), "run %s claims its state", id.Name)
		g.Expect(store.Save(ctx, randomState(g, 1, 64<<10))).To(BeTrue(), "run %s saves its state in parts", id.Name)
		stores[id] = store
	}
	g.Expect(stores[a].Save(ctx, randomState(g, 2, 100))).To(BeTrue(), "A's state whole again, its parts deleted")
	intoB := state.RunObjects{ID: b, Options: state.Options{Storage: storage}}.Store(asA)
	_, err = intoB.Save(ctx, randomState(g, 5, 100))
	g.Expect(err).To(MatchError(ContainSubstring(refused+storage.Kind()+" "+b.StateName())), "B's state")
	part := storage.Object()
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: shoot, Name: b.StateName() + ".a-1"}, part)).To(Succeed(), "B's first part")
	g.Expect(asA.Delete(ctx, part)).To(MatchError(ContainSubstring(refused+storage.Kind()+" "+b.StateName()+".a-1")), "B's part deleted")
	part.SetResourceVersion("")
	part.SetName(b.StateName() + ".b-1")
	g.Expect(asA.Create(ctx, part)).To(MatchError(ContainSubstring(refused+storage.Kind()+" "+b.StateName()+".b-1")), "B's part created")
	loaded, err := state.RunObjects{ID: b, Options: state.Options{Storage: storage}}.Store(env.Client).Load(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded).To(HaveLen(len(randomState(g, 1, 64<<10))), "B's state as B saved it")

	// A token of the ServiceAccount bound to no pod (not one the controller requests).
	admin, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	unbound, err := admin.CoreV1().ServiceAccounts(shoot).CreateToken(ctx, "terraseed-terraformer", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	err = report.Annotations{Client: tokenClient(t, unbound.Status.Token), ID: a}.Write(ctx, report.Report{Progress: progress})
	g.Expect(err).To(MatchError(ContainSubstring("the run pods write with a token bound to their pod only: system:serviceaccount:" + shoot +
		":terraseed-terraformer wrote ConfigMap " + a.ConfigName() + " with a token bound to no pod")))
	g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
}

// runPodClient creates the run pod of id as the controller does, requests its token as
// the pod executor does (podtoken.go: the run pods' ServiceAccount, bound to the pod), and
// returns a client with that token.
func runPodClient(t *testing.T, release string, id run.ID) client.Client {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	controller := impersonate(t, release, "terraseed")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.PodName(), Labels: id.Labels()},
		Spec: corev1.PodSpec{ServiceAccountName: "terraseed-terraformer", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "terraformer", Image: "ghcr.io/terraseed/terraseed:0.1.0"}}},
	}
	g.Expect(controller.Create(ctx, pod)).To(Succeed())
	clientset, err := kubernetes.NewForConfig(serviceAccountConfig(release, "terraseed"))
	g.Expect(err).NotTo(HaveOccurred())
	token, err := clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tokenClient(t, token.Status.Token)
}

func tokenClient(t *testing.T, token string) client.Client {
	t.Helper()
	c, err := client.New(&rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}},
		client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
