package templates_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

// thirdWithMutations is the third provider with a mutations.yaml.
func thirdWithMutations(t *testing.T, mutations string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"provider.yaml", "schema.json", "main.tf.tpl"} {
		data, err := os.ReadFile(filepath.Join("testdata", "providers", "third", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "mutations.yaml"), []byte(mutations), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestShippedMutations(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	aws, err := r.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(aws.Mutations().DeploymentNames()).To(Equal([]string{"kube-apiserver", "kube-controller-manager"}))
	g.Expect(aws.Mutations().Templated()).To(BeFalse())
	kcm, err := aws.RenderMutation("kube-controller-manager", templates.MutationInput{Namespace: "shoot--core--aws-01"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kcm.Containers["kube-controller-manager"].Flags).To(Equal([]string{
		"--cloud-provider=external", "--external-cloud-volume-plugin=aws", "--cloud-config=/etc/kubernetes/cloudprovider/cloudprovider.conf"}))
	g.Expect(kcm.Volumes).To(HaveLen(1))
	g.Expect(kcm.Volumes[0].ConfigMap.Name).To(Equal("cloud-provider-config"))
	none, err := aws.RenderMutation("kube-scheduler", templates.MutationInput{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeNil())

	local, err := r.Provider("local")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(local.Mutations().Templated()).To(BeTrue())
	kcm, err = local.RenderMutation("kube-controller-manager", templates.MutationInput{Namespace: "shoot--dev--local"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kcm.Containers["kube-controller-manager"].Flags).To(ContainElement("--cluster-name=shoot--dev--local"))

	// A provider without mutations.yaml mutates nothing.
	third, err := registry(t, filepath.Join("testdata", "providers")).Provider("third")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third.Mutations()).To(BeNil())
}

// Broken mutation data fails when the provider loads, naming the field.
func TestMutationsAreValidatedOnLoad(t *testing.T) {
	kcm := "deployments:\n  kube-controller-manager:\n    containers:\n      kube-controller-manager:\n"
	for _, c := range []struct{ name, mutations, want string }{
		{"empty", "deployments: {}\n", "deployments: Required value"},
		{"unknown deployment", "deployments:\n  etcd-main:\n    containers:\n      etcd: {flags: [--x=1]}\n", `deployments: Unsupported value: "etcd-main"`},
		{"unknown field", kcm + "        flag: [--x=1]\n", `unknown field "flag"`},
		{"no containers", "deployments:\n  kube-apiserver:\n    volumes: []\n", "deployments[kube-apiserver].containers: Required value"},
		{"flag without dashes", kcm + "        flags: [cloud-provider=aws]\n", `deployments[kube-controller-manager].containers[kube-controller-manager].flags[0]: Invalid value: "cloud-provider=aws"`},
		{"templated flag name", kcm + "        flags: ['--{{ .namespace }}=x']\n", "flags[0]: Invalid value"},
		{"flag twice", kcm + "        flags: [--a=1, --a=2]\n", "flags[1]: Duplicate value: \"--a is already set at deployments[kube-controller-manager].containers[kube-controller-manager].flags[0]\""},
		{"flag and list flag", kcm + "        flags: [--a=1]\n        listFlags: [--a=2]\n", "listFlags[0]: Duplicate value"},
		{"list flag without value", kcm + "        listFlags: [--enable-admission-plugins]\n", "listFlags[0]: Invalid value"},
		{"empty list value", kcm + "        listFlags: ['--enable-admission-plugins=A,,B']\n", "listFlags[0]: Invalid value"},
		{"env name", kcm + "        env: [{name: 'A B', value: x}]\n", "env[0].name: Invalid value: \"A B\""},
		{"mount path", kcm + "        volumeMounts: [{name: config, mountPath: etc/config}]\n", "volumeMounts[0].mountPath: Invalid value: \"etc/config\": must be an absolute path"},
		{"volume without source", kcm + "        flags: [--a=1]\n    volumes: [{name: config}]\n", "deployments[kube-controller-manager].volumes[0]: Invalid value: \"config\": set exactly one volume source"},
		{"volume name", kcm + "        flags: [--a=1]\n    volumes: [{name: Config, emptyDir: {}}]\n", "volumes[0].name: Invalid value: \"Config\""},
		{"volume twice", kcm + "        flags: [--a=1]\n    volumes: [{name: c, emptyDir: {}}, {name: c, emptyDir: {}}]\n", "volumes[1].name: Duplicate value: \"c\""},
		{"a function that changes from call to call", kcm + "        flags: ['--seed={{ randAlpha 8 }}']\n", `function "randAlpha" not defined`},
		{"broken template", kcm + "        flags: ['--a={{ .cluster.name '] \n", "flags[0]: Invalid value: \"--a={{ .cluster.name \": not a template"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := templates.NewRegistry(thirdWithMutations(t, c.mutations))
			var perr *templates.ProviderError
			g.Expect(errors.As(err, &perr)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("mutations.yaml: "))
			g.Expect(err.Error()).To(ContainSubstring(c.want))
		})
	}
}

// Templates read the Cluster; a template that fails, or renders a value invalid where it
// lands, is an error naming the field.
func TestMutationTemplates(t *testing.T) {
	g := NewWithT(t)
	p, err := registry(t, thirdWithMutations(t, `deployments:
  kube-apiserver:
    containers:
      kube-apiserver:
        flags:
          - --cluster-name={{ .cluster.name }}
          - --service-cluster-ip-range={{ dig "spec" "networking" "services" "100.64.0.0/13" .cluster.shoot }}
        env:
          - name: SHOOT
            value: '{{ .cluster.shoot.metadata.name }}'
        volumeMounts:
          - name: '{{ .cluster.shoot.metadata.name }}'
            mountPath: /etc/{{ .type }}
`)).Provider("third")
	g.Expect(err).NotTo(HaveOccurred())

	cluster := &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--x"}, Spec: extensionsv1alpha1.ClusterSpec{
		Shoot: runtime.RawExtension{Raw: []byte(`{"metadata": {"name": "x"}, "spec": {"networking": {"services": "10.0.0.0/16"}}}`)}}}
	m, err := p.RenderMutation("kube-apiserver", templates.MutationInput{Namespace: "shoot--dev--x", Cluster: cluster})
	g.Expect(err).NotTo(HaveOccurred())
	c := m.Containers["kube-apiserver"]
	g.Expect(c.Flags).To(Equal([]string{"--cluster-name=shoot--dev--x", "--service-cluster-ip-range=10.0.0.0/16"}))
	g.Expect(c.Env[0].Value).To(Equal("x"))
	g.Expect(c.VolumeMounts[0].Name).To(Equal("x"))
	g.Expect(c.VolumeMounts[0].MountPath).To(Equal("/etc/third"))

	// Without a Cluster, a template that does not default fails, naming the field.
	_, err = p.RenderMutation("kube-apiserver", templates.MutationInput{Namespace: "shoot--dev--x"})
	var merr *templates.MutationError
	g.Expect(errors.As(err, &merr)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("deployments[kube-apiserver].containers[kube-apiserver].env[0].value"))

	// A rendered value is checked like a literal one.
	cluster.Spec.Shoot.Raw = []byte(`{"metadata": {"name": "Not_A_Label"}}`)
	_, err = p.RenderMutation("kube-apiserver", templates.MutationInput{Namespace: "shoot--dev--x", Cluster: cluster})
	g.Expect(errors.As(err, &merr)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`deployments[kube-apiserver].containers[kube-apiserver].volumeMounts[0].name: Invalid value: "Not_A_Label"`))
}
