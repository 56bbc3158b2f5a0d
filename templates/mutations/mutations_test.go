package mutations_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/mutations"
)

// thirdProviders is the directory of templates' test providers: the third one has
// no mutations.yaml, and thirdWithMutations adds one.
var thirdProviders = filepath.Join("..", "testdata", "providers")

func registry(t testing.TB, dirs ...string) *templates.Registry {
	t.Helper()
	r, err := templates.NewRegistry(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// thirdWithMutations is the third provider with a mutations.yaml.
func thirdWithMutations(t *testing.T, file string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"provider.yaml", "schema.json", "main.tf.tpl"} {
		data, err := os.ReadFile(filepath.Join(thirdProviders, "third", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "mutations.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// clusterOf is a Cluster whose shoot has the Kubernetes version.
func clusterOf(name, version string) *extensionsv1alpha1.Cluster {
	return &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: extensionsv1alpha1.ClusterSpec{
		Shoot: runtime.RawExtension{Raw: []byte(`{"spec": {"kubernetes": {"version": "` + version + `"}}}`)}}}
}

func TestShippedMutations(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	aws, err := r.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(aws.Mutations().DeploymentNames()).To(Equal([]string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}))
	g.Expect(aws.Mutations().ReadsCluster()).To(BeTrue())

	// The seeds' era: the in-tree cloud provider, as the seeds show it.
	seedEra := mutations.Input{Namespace: "shoot--core--aws-01", Cluster: clusterOf("shoot--core--aws-01", "1.16.4")}
	kcm, err := aws.Mutations().Render("kube-controller-manager", seedEra)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kcm.Containers["kube-controller-manager"].Flags).To(Equal([]string{
		"--cloud-provider=external", "--external-cloud-volume-plugin=aws", "--cloud-config=/etc/kubernetes/cloudprovider/cloudprovider.conf"}))
	g.Expect(kcm.Volumes).To(HaveLen(1))
	g.Expect(kcm.Volumes[0].ConfigMap.Name).To(Equal("cloud-provider-config"))
	kas, err := aws.Mutations().Render("kube-apiserver", seedEra)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kas.Containers["kube-apiserver"].Flags).To(ContainElement("--cloud-provider=aws"))
	g.Expect(kas.Containers["kube-apiserver"].ListFlags).To(Equal([]string{"--enable-admission-plugins=PersistentVolumeLabel"}))
	none, err := aws.Mutations().Render("kube-scheduler", seedEra)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeNil())

	// Between the in-tree provider's removal and its volume plugin's.
	kas, err = aws.Mutations().Render("kube-apiserver", mutations.Input{Namespace: "shoot--core--aws-01", Cluster: clusterOf("shoot--core--aws-01", "1.30.2")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kas.Containers["kube-apiserver"].Flags).To(BeEmpty())
	g.Expect(kas.Containers["kube-apiserver"].ListFlags).To(Equal([]string{"--feature-gates=InTreePluginAWSUnregister=true"}))
	g.Expect(kas.Volumes).To(BeEmpty())

	// Today: no in-tree cloud flags for kube-apiserver, the external cloud provider for
	// kube-controller-manager.
	today := mutations.Input{Namespace: "shoot--core--aws-01", Cluster: clusterOf("shoot--core--aws-01", "1.37.1")}
	kas, err = aws.Mutations().Render("kube-apiserver", today)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kas).To(BeNil())
	kcm, err = aws.Mutations().Render("kube-controller-manager", today)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kcm.Containers["kube-controller-manager"].Flags).To(Equal([]string{"--cloud-provider=external"}))
	g.Expect(kcm.Containers["kube-controller-manager"].ListFlags).To(BeEmpty())
	g.Expect(kcm.Volumes).To(BeEmpty())

	// Without a Cluster the version is unknown: refused, naming the field.
	_, err = aws.Mutations().Render("kube-controller-manager", mutations.Input{Namespace: "shoot--core--aws-01"})
	g.Expect(err).To(MatchError(ContainSubstring("cluster.spec.shoot.spec.kubernetes.version: Required value: there is no Cluster for the namespace (versions[0].kubernetesVersion depends on it)")))

	local, err := r.Provider("local")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(local.Mutations().ReadsCluster()).To(BeTrue())
	kcm, err = local.Mutations().Render("kube-controller-manager", mutations.Input{Namespace: "shoot--dev--local"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kcm.Containers["kube-controller-manager"].Flags).To(ContainElement("--cluster-name=shoot--dev--local"))

	// A provider without mutations.yaml mutates nothing.
	third, err := registry(t, thirdProviders).Provider("third")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third.Mutations()).To(BeNil())
}

// Mutations for some Kubernetes versions apply after those for every version, in the
// file's order, for the shoot versions that meet their constraint.
func TestVersionedMutations(t *testing.T) {
	g := NewWithT(t)
	p, err := registry(t, thirdWithMutations(t, `deployments:
  kube-controller-manager:
    containers:
      kube-controller-manager:
        flags: [--cloud-provider=external, --v=2]
versions:
  - kubernetesVersion: "< 1.27"
    deployments:
      kube-controller-manager:
        containers:
          kube-controller-manager:
            flags: [--external-cloud-volume-plugin=aws]
            env: [{name: OLD, value: "yes"}]
  - kubernetesVersion: ">= 1.27, < 1.31"
    deployments:
      kube-controller-manager:
        containers:
          kube-controller-manager:
            listFlags: [--feature-gates=InTreePluginAWSUnregister=true]
  - kubernetesVersion: ">= 1.30"
    deployments:
      kube-controller-manager:
        containers:
          kube-controller-manager:
            flags: ['--v={{ if semverCompare ">= 1.35" (dig "spec" "kubernetes" "version" "" .cluster.shoot) }}4{{ else }}3{{ end }}']
      kube-apiserver:
        containers:
          kube-apiserver:
            flags: [--profiling=false]
`)).Provider("third")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Mutations().DeploymentNames()).To(Equal([]string{"kube-apiserver", "kube-controller-manager"}))
	for _, c := range []struct {
		version   string
		flags     []string
		listFlags []string
		env       int
		apiserver bool
	}{
		{version: "1.16.4", flags: []string{"--cloud-provider=external", "--v=2", "--external-cloud-volume-plugin=aws"}, env: 1},
		{version: "v1.26.15", flags: []string{"--cloud-provider=external", "--v=2", "--external-cloud-volume-plugin=aws"}, env: 1},
		{version: "1.27.0", flags: []string{"--cloud-provider=external", "--v=2"}, listFlags: []string{"--feature-gates=InTreePluginAWSUnregister=true"}},
		// A pre-release compares as its release.
		{version: "1.27.0-alpha.1", flags: []string{"--cloud-provider=external", "--v=2"}, listFlags: []string{"--feature-gates=InTreePluginAWSUnregister=true"}},
		{version: "1.30.1", flags: []string{"--cloud-provider=external", "--v=2", "--v=3"}, listFlags: []string{"--feature-gates=InTreePluginAWSUnregister=true"}, apiserver: true},
		{version: "1.37.1", flags: []string{"--cloud-provider=external", "--v=2", "--v=4"}, apiserver: true},
	} {
		t.Run(c.version, func(t *testing.T) {
			g := NewWithT(t)
			in := mutations.Input{Namespace: "shoot--dev--x", Cluster: clusterOf("shoot--dev--x", c.version)}
			m, err := p.Mutations().Render("kube-controller-manager", in)
			g.Expect(err).NotTo(HaveOccurred())
			kcm := m.Containers["kube-controller-manager"]
			g.Expect(kcm.Flags).To(Equal(c.flags))
			g.Expect(kcm.ListFlags).To(Equal(c.listFlags))
			g.Expect(kcm.Env).To(HaveLen(c.env))
			kas, err := p.Mutations().Render("kube-apiserver", in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kas != nil).To(Equal(c.apiserver))
		})
	}

	// The version is read from the Cluster, and a wrong one is refused naming the field.
	for _, c := range []struct {
		name    string
		cluster *extensionsv1alpha1.Cluster
		want    string
	}{
		{"no Cluster", nil, "cluster.spec.shoot.spec.kubernetes.version: Required value: there is no Cluster for the namespace (versions[0].kubernetesVersion depends on it)"},
		{"no version", &extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{Shoot: runtime.RawExtension{Raw: []byte(`{"spec": {}}`)}}},
			"cluster.spec.shoot.spec.kubernetes.version: Required value: the Cluster's shoot has no Kubernetes version"},
		{"not a version", clusterOf("x", "latest"), `cluster.spec.shoot.spec.kubernetes.version: Invalid value: "latest": not a semantic version`},
		{"not a string", &extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{Shoot: runtime.RawExtension{Raw: []byte(`{"spec": {"kubernetes": {"version": 1.3}}}`)}}},
			"cluster.spec.shoot.spec.kubernetes.version: Invalid value: 1.3: must be a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := p.Mutations().Render("kube-controller-manager", mutations.Input{Namespace: "shoot--dev--x", Cluster: c.cluster})
			var merr *mutations.Error
			g.Expect(errors.As(err, &merr)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(c.want))
			g.Expect(err.Error()).To(HavePrefix(`mutating kube-controller-manager for provider "third": `))
		})
	}
}

// Broken mutation data fails when the provider loads, naming the field.
func TestMutationsAreValidatedOnLoad(t *testing.T) {
	kcm := "deployments:\n  kube-controller-manager:\n    containers:\n      kube-controller-manager:\n"
	for _, c := range []struct{ name, mutations, want string }{
		{"empty", "deployments: {}\n", "deployments: Required value"},
		{"version without constraint", "versions:\n- deployments:\n    kube-apiserver:\n      containers:\n        kube-apiserver: {flags: [--x=1]}\n", "versions[0].kubernetesVersion: Required value"},
		{"version constraint", "versions:\n- kubernetesVersion: newer than 1.27\n  deployments:\n    kube-apiserver:\n      containers:\n        kube-apiserver: {flags: [--x=1]}\n", `versions[0].kubernetesVersion: Invalid value: "newer than 1.27": not a semantic version constraint`},
		{"templated version constraint", "versions:\n- kubernetesVersion: '>= {{ .type }}'\n  deployments:\n    kube-apiserver:\n      containers:\n        kube-apiserver: {flags: [--x=1]}\n", "versions[0].kubernetesVersion: Invalid value: \">= {{ .type }}\": cannot be a template"},
		{"version without deployments", "versions:\n- kubernetesVersion: '< 1.27'\n", "versions[0].deployments: Required value"},
		{"version's unknown deployment", "versions:\n- kubernetesVersion: '< 1.27'\n  deployments:\n    etcd-main:\n      containers:\n        etcd: {flags: [--x=1]}\n", `versions[0].deployments: Unsupported value: "etcd-main"`},
		{"version's bad flag", "versions:\n- kubernetesVersion: '< 1.27'\n  deployments:\n    kube-apiserver:\n      containers:\n        kube-apiserver: {flags: [x=1]}\n", `versions[0].deployments[kube-apiserver].containers[kube-apiserver].flags[0]: Invalid value: "x=1"`},
		{"version's broken template", "versions:\n- kubernetesVersion: '< 1.27'\n  deployments:\n    kube-apiserver:\n      containers:\n        kube-apiserver: {flags: ['--x={{ .type ']}\n", `versions[0].deployments[kube-apiserver].containers[kube-apiserver].flags[0]: Invalid value: "--x={{ .type ": not a template`},
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
	m, err := p.Mutations().Render("kube-apiserver", mutations.Input{Namespace: "shoot--dev--x", Cluster: cluster})
	g.Expect(err).NotTo(HaveOccurred())
	c := m.Containers["kube-apiserver"]
	g.Expect(c.Flags).To(Equal([]string{"--cluster-name=shoot--dev--x", "--service-cluster-ip-range=10.0.0.0/16"}))
	g.Expect(c.Env[0].Value).To(Equal("x"))
	g.Expect(c.VolumeMounts[0].Name).To(Equal("x"))
	g.Expect(c.VolumeMounts[0].MountPath).To(Equal("/etc/third"))

	// Without a Cluster, a template that does not default fails, naming the field.
	_, err = p.Mutations().Render("kube-apiserver", mutations.Input{Namespace: "shoot--dev--x"})
	var merr *mutations.Error
	g.Expect(errors.As(err, &merr)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("deployments[kube-apiserver].containers[kube-apiserver].env[0].value"))

	// A rendered value is checked like a literal one.
	cluster.Spec.Shoot.Raw = []byte(`{"metadata": {"name": "Not_A_Label"}}`)
	_, err = p.Mutations().Render("kube-apiserver", mutations.Input{Namespace: "shoot--dev--x", Cluster: cluster})
	g.Expect(errors.As(err, &merr)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`deployments[kube-apiserver].containers[kube-apiserver].volumeMounts[0].name: Invalid value: "Not_A_Label"`))
}

// Admissions render a provider's mutations concurrently from the templates parsed when it
// loaded, each from its own Cluster: every result is what rendering alone gives, and a
// caller changing what it got changes no other render (run under -race).
func TestConcurrentMutations(t *testing.T) {
	g := NewWithT(t)
	p, err := registry(t, thirdWithMutations(t, `deployments:
  kube-apiserver:
    containers:
      kube-apiserver:
        flags: ['--cluster-name={{ .cluster.name }}', --profiling=false]
        env: [{name: REGION, value: '{{ dig "spec" "region" "" .cluster.shoot }}'}]
    volumes: [{name: config, configMap: {name: '{{ .cluster.name }}'}}]
versions:
  - kubernetesVersion: "< 1.27"
    deployments:
      kube-apiserver:
        containers:
          kube-apiserver:
            flags: [--cloud-provider=aws]
            volumeMounts: [{name: cloud, mountPath: /etc/cloud}]
        volumes: [{name: cloud, configMap: {name: cloud-provider-config}}]
  - kubernetesVersion: ">= 1.27"
    deployments:
      kube-apiserver:
        containers:
          kube-apiserver:
            listFlags: ['--feature-gates=A=true']
            env: [{name: MINOR, value: '{{ (semver (dig "spec" "kubernetes" "version" "" .cluster.shoot)).Minor }}'}]
`)).Provider("third")
	g.Expect(err).NotTo(HaveOccurred())

	inputs := make([]mutations.Input, 64)
	want := make([]*mutations.Deployment, len(inputs))
	for i := range inputs {
		name := fmt.Sprintf("shoot--dev--n%d", i)
		version := []string{"1.16.4", "1.26.3", "1.30.2", "1.37.1"}[i%4]
		inputs[i] = mutations.Input{Namespace: name, Cluster: &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: extensionsv1alpha1.ClusterSpec{
			Shoot: runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"spec": {"kubernetes": {"version": %q}, "region": "region-%d"}}`, version, i))}}}}
		want[i], err = p.Mutations().Render("kube-apiserver", inputs[i])
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(want[0].Containers["kube-apiserver"].Flags).To(Equal([]string{"--cluster-name=shoot--dev--n0", "--profiling=false", "--cloud-provider=aws"}))
	g.Expect(want[0].Volumes).To(HaveLen(2))
	g.Expect(want[3].Containers["kube-apiserver"].Env).To(ContainElement(corev1.EnvVar{Name: "MINOR", Value: "37"}))

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 20 {
				for j := range inputs {
					i := (j + w*7 + round) % len(inputs)
					got, err := p.Mutations().Render("kube-apiserver", inputs[i])
					if err == nil && !reflect.DeepEqual(got, want[i]) {
						err = fmt.Errorf("%s: got %+v, want %+v", inputs[i].Namespace, got, want[i])
					}
					if err != nil {
						errs <- err
						return
					}
					// What a caller does with its mutation stays its own.
					got.Volumes[len(got.Volumes)-1].ConfigMap.Name = "changed"
					c := got.Containers["kube-apiserver"]
					c.Flags[len(c.Flags)-1] = "--changed"
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A mutation reading the seed of a self-hosted shoot's Cluster, which has none, is
// refused naming cluster.spec.seed; one guarding the read renders.
func TestAMutationReadingAnAbsentSeedNamesTheField(t *testing.T) {
	g := NewWithT(t)
	kcm := "deployments:\n  kube-controller-manager:\n    containers:\n      kube-controller-manager:\n        flags: ['--seed=%s']\n"
	selfHosted := &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--x"}, Spec: extensionsv1alpha1.ClusterSpec{
		Shoot: runtime.RawExtension{Raw: []byte(`{"spec": {"kubernetes": {"version": "1.34.0"}}}`)}}}
	in := mutations.Input{Namespace: "shoot--dev--x", Cluster: selfHosted}

	p, err := registry(t, thirdWithMutations(t, fmt.Sprintf(kcm, "{{ .cluster.seed.metadata.name }}"))).Provider("third")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Mutations().Render("kube-controller-manager", in)
	var merr *mutations.Error
	g.Expect(errors.As(err, &merr)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("cluster.spec.seed: Required value: the Cluster has no seed (a self-hosted shoot"))

	p, err = registry(t, thirdWithMutations(t, fmt.Sprintf(kcm, `{{ if hasKey .cluster "seed" }}{{ .cluster.seed.metadata.name }}{{ else }}none{{ end }}`))).Provider("third")
	g.Expect(err).NotTo(HaveOccurred())
	d, err := p.Mutations().Render("kube-controller-manager", in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Containers["kube-controller-manager"].Flags).To(Equal([]string{"--seed=none"}))

	selfHosted.Spec.Seed = &runtime.RawExtension{Raw: []byte(`{"metadata": {"name": "local"}}`)}
	d, err = p.Mutations().Render("kube-controller-manager", in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Containers["kube-controller-manager"].Flags).To(Equal([]string{"--seed=local"}))
}
