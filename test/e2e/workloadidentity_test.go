package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// The controller the chart installed creates and deletes a local Infrastructure whose
// credentials are a workload identity's, through run pods: each mounts the token from the
// credentials Secret as a file, and the local provider calls the node's API server with it.
func TestWorkloadIdentityInfrastructureThroughRunPods(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, adminKubeconfig(t), "10.250.0.0/19")

	// The token of a ServiceAccount allowed to create what the local provider creates, in
	// the Secret as gardenlet writes it for a WorkloadIdentity.
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "workload-identity"}}
	g.Expect(kube.Create(ctx, account)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: s.namespace + "-workload-identity"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: s.namespace, Name: account.Name}},
	}
	g.Expect(kube.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = kube.Delete(context.Background(), binding) })
	token, err := clientset.CoreV1().ServiceAccounts(s.namespace).CreateToken(ctx, account.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := clientcmd.Load(adminKubeconfig(t))
	g.Expect(err).NotTo(HaveOccurred())
	cluster := kubeconfig.Clusters[kubeconfig.Contexts[kubeconfig.CurrentContext].Cluster]
	config, err := json.Marshal(map[string]string{"server": cluster.Server, "certificateAuthorityData": base64.StdEncoding.EncodeToString(cluster.CertificateAuthorityData)})
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{}
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "cloudprovider"}, secret)).To(Succeed())
	secret.Labels = map[string]string{"security.gardener.cloud/purpose": "workload-identity-token-requestor"}
	secret.Data = map[string][]byte{"token": []byte(token.Status.Token), "config": config}
	g.Expect(kube.Update(ctx, secret)).To(Succeed())

	s.create(t)
	s.waitSucceeded(t, extensionsv1alpha1.LastOperationTypeCreate)
	g.Expect(s.networkPolicies(g)).To(ConsistOf("deny-all", "zone-0"))
	pods := s.runPods()
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "cloudprovider")), "the token is mounted from the credentials Secret")
	g.Expect(pods[0].Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "TF_VAR_token_file", Value: "/credentials/0/token"}))

	g.Expect(kube.Delete(ctx, s.infra)).To(Succeed())
	s.waitGone(t)
	pods = s.runPods()
	g.Expect(pods).To(ContainElement(HaveField("Labels", HaveKeyWithValue("terraseed.gardener.cloud/command", "destroy"))), "the destroy ran in a pod")
	for _, pod := range pods {
		g.Expect(pod.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "cloudprovider")), "every run reads the token from the Secret: %s", pod.Labels)
	}
}
