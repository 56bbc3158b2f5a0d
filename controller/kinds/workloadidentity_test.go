package kinds_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/test/testenv"
)

// workloadIdentity is a ServiceAccount of the test cluster whose tokens stand in for a
// workload identity's: the local provider calls the cluster with them.
type workloadIdentity struct {
	namespace, name string
	clientset       *kubernetes.Clientset
}

func newWorkloadIdentity(t *testing.T, namespace string) *workloadIdentity {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	w := &workloadIdentity{namespace: namespace, name: "workload-identity"}
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: w.name}})).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + "-workload-identity"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: w.name}},
	}
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	var err error
	w.clientset, err = kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	return w
}

// token requests a new token, as gardenlet does for the Secret.
func (w *workloadIdentity) token(g Gomega) string {
	request, err := w.clientset.CoreV1().ServiceAccounts(w.namespace).CreateToken(context.Background(), w.name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return request.Status.Token
}

// secret is the credentials Secret as gardenlet writes it for a WorkloadIdentity.
func (w *workloadIdentity) secret(g Gomega, token string) *corev1.Secret {
	config, err := json.Marshal(map[string]string{
		"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "WorkloadIdentityConfig",
		"server": env.Config.Host, "certificateAuthorityData": base64.StdEncoding.EncodeToString(env.Config.CAData),
	})
	g.Expect(err).NotTo(HaveOccurred())
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace, Name: "cloudprovider", Labels: map[string]string{
			"security.gardener.cloud/purpose":                   "workload-identity-token-requestor",
			"workloadidentity.security.gardener.cloud/provider": "local",
		}},
		Data: map[string][]byte{"token": []byte(token), "config": config},
	}
}

// TestAWorkloadIdentityInfrastructure creates, renews the token of, and deletes a local
// Infrastructure whose credentials are a workload identity's: a ServiceAccount token of
// the cluster, read by the runs from a file, and the cluster from its config. A renewed
// token applies nothing again; the tokens reach no ConfigMap, other Secret, event, status
// or log.
func TestAWorkloadIdentityInfrastructure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	w := newWorkloadIdentity(t, s.namespace)
	first := w.token(g)
	secret := w.secret(g, first)
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	logs := &testenv.SyncBuffer{}
	log := funcr.New(func(prefix, args string) { _, _ = logs.Write([]byte(prefix + " " + args + "\n")) }, funcr.Options{Verbosity: 10})
	c := startControllerLogging(t, s.namespace, workDir(t), env.Config, 2, log)

	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, &networkingv1.NetworkPolicy{})).To(Succeed())
	created := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, created)).To(Succeed())

	// gardenlet renews the token at about half its lifetime: the Secret changes, and the
	// Infrastructure, whose runs read the token from the Secret, stays as it is.
	renewed := w.token(g)
	g.Expect(renewed).NotTo(Equal(first))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	secret.Data["token"] = []byte(renewed)
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	g.Consistently(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.LastOperation.LastUpdateTime).To(Equal(infra.Status.LastOperation.LastUpdateTime), "no operation for a renewed token")
	}).WithTimeout(3 * time.Second).Should(Succeed())
	// A reconcile Gardener asks for runs with the renewed token.
	s.reconciled(t)

	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}.StateName()}, &corev1.ConfigMap{})).To(Succeed(), "the state is among the ConfigMaps looked at")
	expectNoToken(g, s, c, logs, first, renewed)

	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, created)).To(Succeed())
	g.Expect(created.DeletionTimestamp).NotTo(BeNil(), "the destroy ran with the token")
	expectNoToken(g, s, c, logs, first, renewed)
}

// expectNoToken checks that no token is in a ConfigMap, a Secret but the credentials, an
// event, the Infrastructure, the controller's log or terraform's output.
func expectNoToken(g Gomega, s *shoot, c *controllerUnderTest, logs *testenv.SyncBuffer, tokens ...string) {
	ctx := context.Background()
	var where []string
	configMaps := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(ctx, configMaps, client.InNamespace(s.namespace))).To(Succeed())
	for _, cm := range configMaps.Items {
		raw, err := json.Marshal(cm)
		g.Expect(err).NotTo(HaveOccurred())
		where = append(where, "ConfigMap "+cm.Name+": "+string(raw))
	}
	secrets := &corev1.SecretList{}
	g.Expect(env.Client.List(ctx, secrets, client.InNamespace(s.namespace))).To(Succeed())
	for _, secret := range secrets.Items {
		if secret.Name != "cloudprovider" {
			raw, err := json.Marshal(secret)
			g.Expect(err).NotTo(HaveOccurred())
			where = append(where, "Secret "+secret.Name+": "+string(raw))
		}
	}
	events := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, events, client.InNamespace(s.namespace))).To(Succeed())
	for _, e := range events.Items {
		where = append(where, "event: "+e.Note)
	}
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := env.Client.Get(ctx, s.key(), infra); err == nil {
		raw, err := json.Marshal(infra)
		g.Expect(err).NotTo(HaveOccurred())
		where = append(where, "Infrastructure: "+string(raw))
	}
	where = append(where, "log: "+logs.String(), "terraform: "+c.output.String())
	for _, token := range tokens {
		// Any part of the token's signature would do as much harm as the whole.
		signature := token[strings.LastIndex(token, ".")+1:]
		for _, w := range where {
			g.Expect(w).NotTo(ContainSubstring(signature), "a token in %.80s", w)
		}
	}
	g.Expect(logs.String()).To(ContainSubstring("runStarting"), "the log was captured")
}

// A workload identity's token is never stored, so a deletion whose Secret is gone cannot
// fall back on the last run's credentials: it says to recreate the Secret, and goes on
// once it is back.
func TestDeletingAWorkloadIdentityInfrastructureNeedsItsSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	w := newWorkloadIdentity(t, s.namespace)
	secret := w.secret(g, w.token(g))
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	g.Expect(env.Client.Delete(ctx, secret)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	g.Eventually(func(g Gomega) {
		infra := s.get(g)
		g.Expect(infra.Status.LastError).NotTo(BeNil())
		g.Expect(infra.Status.LastError.Description).To(ContainSubstring("the runs read a workload identity's token from it, which is never stored: recreate the secret"))
	}).WithTimeout(time.Minute).Should(Succeed())

	secret = w.secret(g, w.token(g))
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	s.waitGone(t)
}
