package executor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// A run pod whose executor knows the API server's CA gets a token requested for it, in
// its credentials Secret, and mounts no volume: the terraformer, given no kubeconfig,
// reaches the API server with that token as the run pods' ServiceAccount. The token is
// bound to the pod and lives as long as the pod may; once the pod is gone, it is refused.
func TestARunPodWithARequestedTokenMountsNoVolume(t *testing.T) {
	g := NewWithT(t)
	f, k, e := tokenFixture(t, 3)
	ctx := tokenContext(t)

	result, err := e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Outputs["names"]).To(HaveLen(3))
	g.Expect(f.Items(g)).To(HaveLen(3))

	pods := k.startedPods()
	g.Expect(pods).To(HaveLen(1))
	pod := pods[0]
	g.Expect(pod.Spec.Volumes).To(BeEmpty(), "%+v", pod.Spec.Volumes)
	g.Expect(pod.Spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
	c := pod.Spec.Containers[0]
	g.Expect(c.VolumeMounts).To(BeEmpty())
	g.Expect(strings.Join(c.Args, " ")).To(ContainSubstring("--work-dir /tmp/work"))
	g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeFalse()))

	k.mu.Lock()
	secret := k.secrets[pod.Name]
	k.mu.Unlock()
	g.Expect(secret).To(HaveKeyWithValue(terraformer.EnvAPICA, env.Config.CAData))
	g.Expect(secret).To(HaveKeyWithValue("TF_VAR_kubeconfig", []byte(f.Kubeconfig)), "the run's own credentials beside it")
	token := string(secret[terraformer.EnvAPIToken])
	claims := tokenClaims(g, token)
	g.Expect(claims.Kubernetes.Pod.Name).To(Equal(pod.Name))
	g.Expect(claims.Kubernetes.Pod.UID).To(BeEquivalentTo(pod.UID))
	g.Expect(claims.Kubernetes.ServiceAccount.Name).To(Equal("terraformer"))
	lifetime := e.CreationTimeout + e.RunTimeout + e.stopGrace() + tokenMargin
	g.Expect(claims.Expiry - claims.IssuedAt).To(BeEquivalentTo(lifetime / time.Second))
	startBy, err := time.Parse(time.RFC3339, string(secret[terraformer.EnvAPIStartBy]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(startBy.Unix()).To(BeNumerically("~", claims.IssuedAt+int64(e.CreationTimeout/time.Second), 1))

	// The run ended and its pod is gone: its token with it, once the API server's
	// cache of tokens it accepted (10 s) has let it go.
	g.Eventually(func(g Gomega) {
		review, err := e.Clientset.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(review.Status.Authenticated).To(BeFalse())
		g.Expect(review.Status.Error).To(ContainSubstring("invalidated"))
	}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
}

// A seed whose API server gives tokens a shorter life than a run pod may have (the test
// environment caps them at 2 h) has its run pods mount the kubelet's token instead, from
// the first run on.
func TestRunPodsMountTheirTokenWhereRequestedOnesWouldExpireTooSoon(t *testing.T) {
	g := NewWithT(t)
	f, k, e := tokenFixture(t, 1)
	e.RunTimeout = 3 * time.Hour
	ctx := tokenContext(t)

	_, err := e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.requestsTokens()).To(BeFalse())
	pods := k.startedPods()
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Spec.AutomountServiceAccountToken).To(BeNil())
	g.Expect(pods[0].Spec.Volumes).To(HaveLen(2))
	k.mu.Lock()
	defer k.mu.Unlock()
	g.Expect(k.secrets[pods[0].Name]).NotTo(HaveKey(terraformer.EnvAPIToken))
}

// A run pod being deleted still runs in its grace period, its terraformer saving the
// state: its token still works then, as the kubelet's would, until the pod is gone.
func TestARequestedTokenWorksWhileItsPodStops(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	e := f.podExecutor()
	e.ManageServiceAccount, e.APICA = true, env.Config.CAData
	ctx := tokenContext(t)
	pod, err := e.create(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	pod.Finalizers = append(pod.Finalizers, "terraseed.test/hold")
	g.Expect(env.Client.Update(ctx, pod)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Patch(context.Background(), pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.EnvSecretName()}, secret)).To(Succeed())
	asRunPod, err := client.New(&rest.Config{Host: env.Config.Host, BearerToken: string(secret.Data[terraformer.EnvAPIToken]),
		TLSClientConfig: rest.TLSClientConfig{CAData: secret.Data[terraformer.EnvAPICA]}}, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	// On a node: a pod on none is deleted with no grace period.
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node"}}
	g.Expect(env.Client.SubResource("binding").Create(ctx, pod, binding)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	g.Expect(pod.Spec.NodeName).To(Equal("node"), "bound")
	g.Expect(env.Client.Delete(ctx, pod)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	// The API server deletes a pod at once that is on no node or has ended.
	g.Expect(pod.DeletionGracePeriodSeconds).To(HaveValue(BeNumerically(">", 0)), "in its grace period; node %q, phase %q", pod.Spec.NodeName, pod.Status.Phase)
	g.Expect(pod.DeletionTimestamp.Time).To(BeTemporally(">", time.Now()), "in its grace period")
	config := &corev1.ConfigMap{}
	g.Expect(asRunPod.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ConfigName()}, config)).To(Succeed(), "the run pod's token works in its grace period")
	g.Expect(asRunPod.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: "cloudprovider"}, &corev1.Secret{})).To(
		Satisfy(apierrors.IsForbidden), "as the run pods' ServiceAccount, which reads no other Secret")
}

// tokenFixture is a fixture of n resources, its kubelet, and a pod executor that
// requests its run pods' tokens.
func tokenFixture(t *testing.T, n int) (*fixture, *kubelet, *PodExecutor) {
	f := newFixture(t, n)
	k := startKubelet(f, false)
	e := f.podExecutor()
	e.ManageServiceAccount, e.APICA = true, env.Config.CAData
	return f, k, e
}

func tokenContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type serviceAccountClaims struct {
	IssuedAt   int64 `json:"iat"`
	Expiry     int64 `json:"exp"`
	Kubernetes struct {
		Pod struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"pod"`
		ServiceAccount struct {
			Name string `json:"name"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// tokenClaims reads the claims of a ServiceAccount token (a JWT) without verifying it:
// the API server's TokenReview does that.
func tokenClaims(g Gomega, token string) serviceAccountClaims {
	parts := strings.Split(token, ".")
	g.Expect(parts).To(HaveLen(3), "a JWT")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	g.Expect(err).NotTo(HaveOccurred())
	var claims serviceAccountClaims
	g.Expect(json.Unmarshal(payload, &claims)).To(Succeed())
	return claims
}

// An executor that stopped between creating a run pod and writing its credentials Secret
// (which then holds the pod's token) left a pod the kubelet cannot start: the next run
// replaces it rather than wait for it until the creation timeout.
func TestARunPodLeftWithoutItsSecretIsReplaced(t *testing.T) {
	g := NewWithT(t)
	f, k, e := tokenFixture(t, 1)
	ctx := tokenContext(t)
	req := f.request(run.Apply)
	labels := req.ID.Labels()
	labels[labelCommand] = string(req.Command)
	left := e.podFor(req, labels, nil, true)
	g.Expect(env.Client.Create(ctx, left)).To(Succeed())

	started := time.Now()
	_, err := e.Run(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(time.Since(started)).To(BeNumerically("<", e.CreationTimeout), "not waited for until the creation timeout")
	pods := k.startedPods()
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].UID).NotTo(Equal(left.UID), "a new pod ran")
}

// A credentials Secret an earlier run left (its cleanup failed) is not what a run pod
// starts with: it would hold a token bound to the earlier pod. The token request is
// slowed down here so that the kubelet looks for the Secret before the new one is written.
func TestACredentialsSecretAnEarlierRunLeftDoesNotStartARunPod(t *testing.T) {
	g := NewWithT(t)
	f, k, e := tokenFixture(t, 1)
	e.Clientset = slowTokens{Interface: e.Clientset, delay: 500 * time.Millisecond}
	ctx := tokenContext(t)
	left := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Objects.ID.EnvSecretName()}, Data: map[string][]byte{
		terraformer.EnvAPIToken: []byte("an-earlier-pods-token"), terraformer.EnvAPICA: env.Config.CAData,
		terraformer.EnvAPIStartBy: []byte(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)),
	}}
	g.Expect(env.Client.Create(ctx, left)).To(Succeed())

	_, err := e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	pods := k.startedPods()
	g.Expect(pods).To(HaveLen(1))
	k.mu.Lock()
	defer k.mu.Unlock()
	g.Expect(tokenClaims(g, string(k.secrets[pods[0].Name][terraformer.EnvAPIToken])).Kubernetes.Pod.UID).To(BeEquivalentTo(pods[0].UID))
}

// slowTokens is the test's API server, whose token requests take delay longer.
type slowTokens struct {
	kubernetes.Interface
	delay time.Duration
}

func (c slowTokens) CoreV1() typedcorev1.CoreV1Interface {
	return slowCore{CoreV1Interface: c.Interface.CoreV1(), delay: c.delay}
}

type slowCore struct {
	typedcorev1.CoreV1Interface
	delay time.Duration
}

func (c slowCore) ServiceAccounts(namespace string) typedcorev1.ServiceAccountInterface {
	return slowAccounts{ServiceAccountInterface: c.CoreV1Interface.ServiceAccounts(namespace), delay: c.delay}
}

type slowAccounts struct {
	typedcorev1.ServiceAccountInterface
	delay time.Duration
}

func (a slowAccounts) CreateToken(ctx context.Context, name string, request *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	time.Sleep(a.delay)
	return a.ServiceAccountInterface.CreateToken(ctx, name, request, opts)
}
