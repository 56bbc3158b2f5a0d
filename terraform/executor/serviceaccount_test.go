package executor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// serviceAccountConfig is the test's API server as the ServiceAccount namespace/name.
func serviceAccountConfig(namespace, name string) *rest.Config {
	config := rest.CopyConfig(env.Config)
	config.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return config
}

// writeKubeconfigOf writes config, impersonation included, as a kubeconfig file.
func writeKubeconfigOf(config *rest.Config, path string) error {
	if err := tftest.WriteKubeconfig(config, path); err != nil || config.Impersonate.UserName == "" {
		return err
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return err
	}
	for _, user := range kc.AuthInfos {
		user.Impersonate = config.Impersonate.UserName
		user.ImpersonateGroups = config.Impersonate.Groups
	}
	return clientcmd.WriteToFile(*kc, path)
}

// A run pod executes third-party provider plugins with cloud credentials: its
// ServiceAccount reaches its own run objects, by name, and nothing else of its namespace.
// The runs below are made with the ServiceAccount's rights only.
func TestRunPodReachesOnlyItsOwnRunObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 2)
	other := env.Namespace(t)
	for _, ns := range []string{f.Namespace, other} {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"}, Data: map[string][]byte{"token": []byte("cloud-token")}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}, Data: map[string]string{"a": "1"}})).To(Succeed())
	}
	startKubeletWith(f, kubeletOptions{asServiceAccount: true})
	e := f.podExecutor()
	e.ServiceAccountName = ""
	e.ManageServiceAccount = true

	// A full run, as the ServiceAccount.
	result, err := e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Outputs["names"]).To(HaveLen(2))
	g.Expect(f.Items(g)).To(HaveLen(2))

	role := &rbacv1.Role{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: defaultServiceAccountName}, role)).To(Succeed())
	binding := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: defaultServiceAccountName}, binding)).To(Succeed())
	g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: defaultServiceAccountName}))
	g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: f.Namespace, Name: defaultServiceAccountName}))
	// Ensuring again changes nothing.
	g.Expect(e.EnsureServiceAccount(ctx, f.Objects.ID)).To(Succeed())
	again := &rbacv1.Role{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(role), again)).To(Succeed())
	g.Expect(again.ResourceVersion).To(Equal(role.ResourceVersion))

	c, err := client.New(serviceAccountConfig(f.Namespace, defaultServiceAccountName), client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	forbidden := func(what string, err error) {
		t.Helper()
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
	}
	for _, ns := range []string{f.Namespace, other} {
		forbidden("get secrets/cloudprovider in "+ns, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cloudprovider"}, &corev1.Secret{}))
		forbidden("list secrets in "+ns, c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))
		forbidden("list configmaps in "+ns, c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)))
		forbidden("delete the configmaps of "+ns, c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns)))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}, Data: map[string]string{"a": "2"}}
		forbidden("update configmaps/someone-elses in "+ns, c.Update(ctx, cm))
		forbidden("delete configmaps/someone-elses in "+ns, c.Delete(ctx, cm))
	}
	forbidden("get the configuration of another namespace", c.Get(ctx, client.ObjectKey{Namespace: other, Name: f.Objects.ConfigName()}, &corev1.ConfigMap{}))
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.VarsName()}, &corev1.Secret{})).To(Succeed())
	forbidden("update its own variables", c.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Objects.VarsName()}}))

	// A state split into parts is written, and written again, as the ServiceAccount: the
	// parts of the older generation are deleted by name.
	stored, err := f.Objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	store := f.Objects.Store(c)
	store.Limit = 64 << 10
	for i := range 2 {
		bigger := biggerState(g, stored, int64(i+1), 300<<10)
		written, err := store.Save(ctx, bigger)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(written).To(BeTrue())
		parts := &corev1.ConfigMapList{}
		g.Expect(env.Client.List(ctx, parts, client.InNamespace(f.Namespace), client.MatchingLabels{state.LabelPartOf: f.Objects.StateName()})).To(Succeed())
		g.Expect(len(parts.Items)).To(BeNumerically(">", 1))
		for _, part := range parts.Items {
			g.Expect(part.Labels).To(HaveKeyWithValue(state.AnnotationGeneration, []string{"a", "b"}[i]), "only the parts of the current generation are left")
		}
		loaded, err := f.Objects.ReadState(ctx, env.Client)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(loaded).To(Equal(bigger))
	}

	// The runs go on with the split state: another apply and the destroy, as the ServiceAccount.
	_, err = e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = e.Run(ctx, f.request(run.Destroy))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(f.Items(g)).To(BeEmpty()) }).WithTimeout(10 * time.Second).Should(Succeed())
	var kept corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "someone-elses"}, &kept)).To(Succeed())
	g.Expect(kept.Data).To(Equal(map[string]string{"a": "1"}))
}

// biggerState is state with a higher serial and an output of about size random bytes.
func biggerState(g Gomega, stored []byte, serialAdd int64, size int) []byte {
	var doc map[string]any
	g.Expect(json.Unmarshal(stored, &doc)).To(Succeed())
	doc["serial"] = doc["serial"].(float64) + float64(serialAdd)
	noise := make([]byte, size)
	for i := range noise {
		noise[i] = byte(rand.IntN(256))
	}
	outputs, _ := doc["outputs"].(map[string]any)
	if outputs == nil {
		outputs = map[string]any{}
	}
	outputs["blob"] = map[string]any{"value": base64.StdEncoding.EncodeToString(noise), "type": "string"}
	doc["outputs"] = outputs
	out, err := json.Marshal(doc)
	g.Expect(err).NotTo(HaveOccurred())
	return out
}

// With the state kept in Secrets, a run pod's ServiceAccount reads and writes its own state
// Secret by name, and neither another Infrastructure's of the same namespace nor any
// ConfigMap of state. The runs below are made with the ServiceAccount's rights only.
func TestRunPodKeepsItsStateInItsOwnSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 2)
	f.Objects.Storage = state.StorageSecret
	startKubeletWith(f, kubeletOptions{asServiceAccount: true})
	e := f.podExecutor()
	e.ServiceAccountName = ""
	e.ManageServiceAccount = true
	e.State.Storage = state.StorageSecret

	result, err := e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Outputs["names"]).To(HaveLen(2))
	g.Expect(f.Items(g)).To(HaveLen(2))
	key := client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.StateName()}
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &corev1.ConfigMap{}))).To(BeTrue(), "no ConfigMap of state")
	names, _ := f.StateItems(g)
	g.Expect(names).To(HaveLen(2))

	c, err := client.New(serviceAccountConfig(f.Namespace, defaultServiceAccountName), client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	own := &corev1.Secret{}
	g.Expect(c.Get(ctx, key, own)).To(Succeed())
	g.Expect(own.Data).To(HaveKey(state.Key))
	g.Expect(c.Update(ctx, own)).To(Succeed())
	other := state.RunObjects{ID: run.ID{Namespace: f.Namespace, Name: "other", Purpose: run.PurposeInfra}, Options: state.Options{Storage: state.StorageSecret}}
	otherState := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: other.StateName()}, Data: map[string][]byte{state.Key: []byte("{}")}}
	g.Expect(env.Client.Create(ctx, otherState)).To(Succeed())
	forbidden := func(what string, err error) {
		t.Helper()
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
	}
	forbidden("get another Infrastructure's state", c.Get(ctx, client.ObjectKeyFromObject(otherState), &corev1.Secret{}))
	forbidden("update another Infrastructure's state", c.Update(ctx, otherState))
	_, err = other.Store(c).Load(ctx)
	forbidden("load another Infrastructure's state", err)
	forbidden("get a ConfigMap of state", c.Get(ctx, key, &corev1.ConfigMap{}))
	forbidden("create a ConfigMap", c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Objects.StateName()}}))
	forbidden("list Secrets", c.List(ctx, &corev1.SecretList{}, client.InNamespace(f.Namespace)))

	// Another apply and the destroy, as the ServiceAccount.
	_, err = e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = e.Run(ctx, f.request(run.Destroy))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(f.Items(g)).To(BeEmpty()) }).WithTimeout(10 * time.Second).Should(Succeed())
}

// A destroy that ended released the run objects, and the controller deletes them next; one
// that died in between reconciles the deletion again, and the second destroy's pod finds
// the variables Secret released, which its ServiceAccount may not claim. The executor
// claims it before the pod starts, and the second destroy ends as the first did.
func TestADestroyRepeatedAfterTheRunObjectsWereReleasedClaimsThemAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 2)
	startKubeletWith(f, kubeletOptions{asServiceAccount: true})
	e := f.podExecutor()
	e.ServiceAccountName = ""
	e.ManageServiceAccount = true

	_, err := e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = e.Run(ctx, f.request(run.Destroy))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Finalizers(g)).To(HaveEach(BeEmpty()), "the destroy released the run objects")

	_, err = e.Run(ctx, f.request(run.Destroy))
	g.Expect(err).NotTo(HaveOccurred(), "the repeated destroy")
	g.Expect(f.Items(g)).To(BeEmpty())
	g.Expect(f.Finalizers(g)).To(HaveEach(BeEmpty()), "released again")
}

// RoleBindings are read from the API server, not a cache, and a seed starts many run pods:
// ensuring the ServiceAccount reads its RoleBinding once, whether it creates, corrects or
// leaves it.
func TestEnsuringTheServiceAccountReadsItsRoleBindingOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 1)
	var reads atomic.Int32
	watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	e := f.podExecutor()
	e.ServiceAccountName = ""
	e.ManageServiceAccount = true
	e.Client = interceptor.NewClient(watching, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*rbacv1.RoleBinding); ok {
				reads.Add(1)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	key := client.ObjectKey{Namespace: f.Namespace, Name: defaultServiceAccountName}
	want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.Namespace, Name: defaultServiceAccountName}}
	ensure := func(what string) *rbacv1.RoleBinding {
		t.Helper()
		reads.Store(0)
		g.Expect(e.EnsureServiceAccount(ctx, f.Objects.ID)).To(Succeed())
		g.Expect(reads.Load()).To(BeEquivalentTo(1), "RoleBinding reads when it %s", what)
		binding := &rbacv1.RoleBinding{}
		g.Expect(env.Client.Get(ctx, key, binding)).To(Succeed())
		g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: defaultServiceAccountName}))
		g.Expect(binding.Subjects).To(Equal(want))
		return binding
	}

	created := ensure("is created")
	g.Expect(ensure("is up to date").ResourceVersion).To(Equal(created.ResourceVersion), "an up-to-date binding is not written")

	created.Subjects = append(created.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: f.Namespace, Name: "someone"})
	g.Expect(env.Client.Update(ctx, created)).To(Succeed())
	ensure("grants someone else too")

	g.Expect(env.Client.Delete(ctx, created)).To(Succeed())
	other := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: defaultServiceAccountName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: want}
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	g.Expect(ensure("binds another role").UID).NotTo(Equal(other.UID), "a binding to another role is replaced")
}
