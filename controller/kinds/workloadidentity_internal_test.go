package kinds

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/terraseed/terraseed/api/scheme"
	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/run"
)

// The apply request of an aws Infrastructure, through the apply's phases up to the
// request, for a credentials Secret of the given labels and data.
func awsApplyRequest(t *testing.T, namespace string, labels map[string]string, data map[string]string) run.Request {
	t.Helper()
	g := NewWithT(t)
	infra := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "infra", UID: "uid-1"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws", ProviderConfig: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureConfig","networks":{"vpc":{"cidr":"10.250.0.0/16"},"zones":[{"name":"eu-west-1a","internal":"10.250.112.0/22","public":"10.250.96.0/22","workers":"10.250.0.0/19"}]}}`)}},
			Region:    "eu-west-1",
			SecretRef: corev1.SecretReference{Name: "cloudprovider", Namespace: namespace},
		},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cloudprovider", Labels: labels}, Data: map[string][]byte{}}
	for k, v := range data {
		secret.Data[k] = []byte(v)
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	providers, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	a := &Actuator{Client: c, APIReader: c, Providers: providers, Runs: newFakeRuns()}
	op := a.operation(request{Object: infra})
	s := &applyScope{}
	ctx := context.Background()
	g.Expect(runPhases(ctx, s, []phase[applyScope]{op.readInputs, op.render, op.request})).To(Succeed())
	return s.request
}

// The runs of one set of credentials share one budget whatever their project or kind of
// credentials: the same static keys in another project's Secret are the same account's,
// a workload identity's are other credentials. A workload identity's run gets the role
// ARN and the token's file, and no static key.
func TestTheRunBudgetIsTheCredentialsWhateverTheirProjectOrKind(t *testing.T) {
	g := NewWithT(t)
	static := awsApplyRequest(t, "shoot--dev--a", nil, map[string]string{"accessKeyID": "AKIA1", "secretAccessKey": "secret"})
	sameKeys := awsApplyRequest(t, "shoot--other--a", nil, map[string]string{"accessKeyID": "AKIA1", "secretAccessKey": "secret"})
	identity := awsApplyRequest(t, "shoot--dev--b", map[string]string{"security.gardener.cloud/purpose": "workload-identity-token-requestor"},
		map[string]string{"token": "header.payload.signature", "config": `{"roleARN":"arn:aws:iam::123456789012:role/r"}`})

	g.Expect(static.Budget).To(MatchRegexp(`^[0-9a-f]{12}$`))
	g.Expect(sameKeys.Budget).To(Equal(static.Budget), "another project, the same keys: the same account's budget")
	g.Expect(identity.Budget).NotTo(Equal(static.Budget), "the same project, other credentials: another budget")

	g.Expect(static.Env).To(HaveKeyWithValue("AWS_ACCESS_KEY_ID", "AKIA1"))
	g.Expect(static.Files).To(BeEmpty())
	g.Expect(identity.Env).To(Equal(map[string]string{"TF_VAR_role_arn": "arn:aws:iam::123456789012:role/r"}))
	g.Expect(identity.Files).To(Equal(map[string]corev1.SecretKeySelector{"TF_VAR_web_identity_token_file": {LocalObjectReference: corev1.LocalObjectReference{Name: "cloudprovider"}, Key: "token"}}))
	g.Expect(identity.Digest).NotTo(Equal(static.Digest), "another configuration: the role is assumed")
}

// A workload identity's Secret in another namespace, which the operator's
// --allow-cross-namespace-secret-refs lets spec.secretRef name, is refused naming the
// field: no run pod can mount it.
func TestAWorkloadIdentitySecretOfAnotherNamespaceIsRefused(t *testing.T) {
	g := NewWithT(t)
	infra := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--dev--a", Name: "infra", UID: "uid-1"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws"},
			Region:      "eu-west-1",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: "garden-dev"},
		},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "garden-dev", Name: "cloudprovider", Labels: map[string]string{"security.gardener.cloud/purpose": "workload-identity-token-requestor"}},
		Data:       map[string][]byte{"token": []byte("t"), "config": []byte(`{"roleARN":"arn:aws:iam::1:role/r"}`)},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	providers, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	a := &Actuator{Client: c, APIReader: c, Providers: providers, Runs: newFakeRuns(), AllowCrossNamespaceSecretRefs: true}
	_, _, err = a.operation(request{Object: infra}).inputs(context.Background())
	g.Expect(err).To(MatchError(ContainSubstring(`spec.secretRef.namespace: the runs read files of secret garden-dev/cloudprovider, a workload identity's token, from the Secret itself, which must be in the Infrastructure's namespace "shoot--dev--a"`)))
}
