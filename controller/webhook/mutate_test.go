package webhook_test

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"

	"github.com/terraseed/terraseed/controller/webhook"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/mutations"
)

func container(command, args []string) *corev1.PodSpec {
	return &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Command: command, Args: args}}}
}

func TestMutateFlags(t *testing.T) {
	m := &mutations.Deployment{Containers: map[string]mutations.Container{"c": {
		Flags:     []string{"--cloud-provider=aws", "--profiling", "--v=2"},
		ListFlags: []string{"--enable-admission-plugins=PersistentVolumeLabel,NodeRestriction"},
	}}}
	for _, c := range []struct {
		name                  string
		command, args         []string
		wantCommand, wantArgs []string
	}{
		{
			name:        "appended to command when there are no args",
			command:     []string{"/hyperkube", "apiserver"},
			wantCommand: []string{"/hyperkube", "apiserver", "--cloud-provider=aws", "--profiling", "--v=2", "--enable-admission-plugins=PersistentVolumeLabel,NodeRestriction"},
		},
		{
			name:        "appended to args when there are some",
			command:     []string{"/kube-apiserver"},
			args:        []string{"--secure-port=443"},
			wantCommand: []string{"/kube-apiserver"},
			wantArgs:    []string{"--secure-port=443", "--cloud-provider=aws", "--profiling", "--v=2", "--enable-admission-plugins=PersistentVolumeLabel,NodeRestriction"},
		},
		{
			name:        "replaced where they are, every occurrence, bare or with a value",
			command:     []string{"/kube-apiserver", "--v=4", "--cloud-provider=gce"},
			args:        []string{"--profiling=false", "--cloud-provider", "--cloud-provider-gce-lb-src-cidrs=x", "--v=5"},
			wantCommand: []string{"/kube-apiserver", "--v=2", "--cloud-provider=aws"},
			wantArgs:    []string{"--profiling", "--cloud-provider=aws", "--cloud-provider-gce-lb-src-cidrs=x", "--v=2", "--enable-admission-plugins=PersistentVolumeLabel,NodeRestriction"},
		},
		{
			name:        "list values added once, order kept",
			command:     []string{"/kube-apiserver", "--enable-admission-plugins=NodeRestriction,Priority"},
			wantCommand: []string{"/kube-apiserver", "--enable-admission-plugins=NodeRestriction,Priority,PersistentVolumeLabel", "--cloud-provider=aws", "--profiling", "--v=2"},
		},
		{
			name:        "an empty list",
			command:     []string{"/kube-apiserver", "--enable-admission-plugins="},
			wantCommand: []string{"/kube-apiserver", "--enable-admission-plugins=PersistentVolumeLabel,NodeRestriction", "--cloud-provider=aws", "--profiling", "--v=2"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			pod := container(c.command, c.args)
			webhook.Mutate(pod, m)
			g.Expect(pod.Containers[0].Command).To(Equal(c.wantCommand))
			g.Expect(pod.Containers[0].Args).To(Equal(c.wantArgs))
			once := pod.DeepCopy()
			webhook.Mutate(pod, m)
			g.Expect(pod).To(Equal(once), "mutating twice differs from once")
		})
	}
}

func TestMutateEnvAndVolumes(t *testing.T) {
	g := NewWithT(t)
	m := &mutations.Deployment{
		Containers: map[string]mutations.Container{
			"c":       {Env: []corev1.EnvVar{{Name: "A", Value: "new"}, {Name: "B", Value: "b"}}, VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/new"}}},
			"missing": {Flags: []string{"--x=1"}},
		},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-provider-config"}}}}},
	}
	pod := container([]string{"/c"}, nil)
	pod.Containers[0].Env = []corev1.EnvVar{{Name: "Z", Value: "z"}, {Name: "A", Value: "old"}}
	pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/old"}}
	pod.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, {Name: "config"}}
	webhook.Mutate(pod, m)
	g.Expect(pod.Containers).To(HaveLen(1), "a container the pod does not have is not added")
	g.Expect(pod.Containers[0].Command).To(Equal([]string{"/c"}))
	g.Expect(pod.Containers[0].Env).To(Equal([]corev1.EnvVar{{Name: "Z", Value: "z"}, {Name: "A", Value: "new"}, {Name: "B", Value: "b"}}))
	g.Expect(pod.Containers[0].VolumeMounts).To(Equal([]corev1.VolumeMount{{Name: "config", MountPath: "/new"}}))
	g.Expect(pod.Volumes).To(HaveLen(2))
	g.Expect(pod.Volumes[0].Name).To(Equal("data"))
	g.Expect(pod.Volumes[1]).To(Equal(m.Volumes[0]))
	once := pod.DeepCopy()
	webhook.Mutate(pod, m)
	g.Expect(pod).To(Equal(once))
}

// The aws mutation turns the seeds' Deployments, for a shoot of the seeds' Kubernetes
// version, into what the seeds show, and a second pass changes nothing.
func TestMutateSeeds(t *testing.T) {
	registry, err := templates.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	aws, err := registry.Provider("aws")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/cluster-seed-era.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cluster := &extensionsv1alpha1.Cluster{}
	if err := yaml.UnmarshalStrict(data, cluster); err != nil {
		t.Fatal(err)
	}
	for _, seed := range []string{"seed-001-kube-controller-manager", "seed-002-kube-apiserver"} {
		t.Run(seed, func(t *testing.T) {
			g := NewWithT(t)
			d, want := readDeployment(t, seed+".yaml"), readDeployment(t, seed+"-mutated.yaml")
			m, err := aws.Mutations().Render(d.Name, mutations.Input{Namespace: "shoot--core--aws-01", Cluster: cluster})
			g.Expect(err).NotTo(HaveOccurred())
			webhook.Mutate(&d.Spec.Template.Spec, m)
			// The seed shows the API server's default mode; the mutation leaves it to it.
			want.Spec.Template.Spec.Volumes[0].ConfigMap.DefaultMode = nil
			g.Expect(d.Spec.Template.Spec).To(Equal(want.Spec.Template.Spec))
			once := d.DeepCopy()
			webhook.Mutate(&d.Spec.Template.Spec, m)
			g.Expect(d).To(Equal(once))
		})
	}
}

// BenchmarkMutateDeployment is the work of one admission past decoding: rendering the
// provider's mutation (templated from the Cluster for local) and applying it.
func BenchmarkMutateDeployment(b *testing.B) {
	registry, err := templates.NewRegistry()
	if err != nil {
		b.Fatal(err)
	}
	cluster := &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "shoot--core--aws-01"}, Spec: extensionsv1alpha1.ClusterSpec{
		Shoot: runtime.RawExtension{Raw: []byte(`{"spec": {"kubernetes": {"version": "1.37.1"}, "region": "eu-west-1", "networking": {"pods": "100.96.0.0/11"}}}`)}}}
	for _, providerType := range []string{"aws", "local"} {
		b.Run(providerType, func(b *testing.B) {
			p, err := registry.Provider(providerType)
			if err != nil {
				b.Fatal(err)
			}
			seed := readDeployment(b, "seed-001-kube-controller-manager.yaml")
			for b.Loop() {
				d := seed.DeepCopy()
				if changed, err := webhook.MutateDeployment(p, d, cluster.Name, cluster); err != nil || !changed {
					b.Fatalf("changed %t: %v", changed, err)
				}
			}
		})
	}
}
