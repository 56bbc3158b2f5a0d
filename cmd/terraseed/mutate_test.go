package main

import (
	"bytes"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

const seeds = "../../controller/webhook/testdata"

// TestMutate prints the seed's kube-controller-manager as the aws webhook stores it for
// a shoot of the seeds' Kubernetes version.
func TestMutate(t *testing.T) {
	g := NewWithT(t)
	var out, stderr bytes.Buffer
	g.Expect(runMutate([]string{"-f", filepath.Join(seeds, "seed-001-kube-controller-manager.yaml"), "--type", "aws",
		"--cluster", filepath.Join(seeds, "cluster-seed-era.yaml")}, &out, &stderr)).To(Succeed())
	got := &appsv1.Deployment{}
	g.Expect(yaml.UnmarshalStrict(out.Bytes(), got)).To(Succeed())
	want := &appsv1.Deployment{}
	readTestObject(t, filepath.Join(seeds, "seed-001-kube-controller-manager-mutated.yaml"), want)
	g.Expect(got.Spec.Template.Spec.Containers).To(Equal(want.Spec.Template.Spec.Containers))
	g.Expect(stderr.String()).To(BeEmpty())

	// A Deployment the provider leaves alone is printed as it is, and said so.
	out.Reset()
	g.Expect(runMutate([]string{"-f", filepath.Join(seeds, "seed-002-kube-apiserver.yaml"), "--type", "local"}, &out, &stderr)).To(Succeed())
	g.Expect(stderr.String()).To(ContainSubstring(`unchanged: provider "local" mutates [kube-controller-manager]`))
	g.Expect(out.String()).To(ContainSubstring("- --enable-admission-plugins=Priority,...,NamespaceLifecycle\n"))
}

func TestMutateErrors(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	g.Expect(runMutate(nil, &out, &out)).To(MatchError(ContainSubstring("-f and --type are required")))
	kcm := filepath.Join(seeds, "seed-001-kube-controller-manager.yaml")
	// aws mutates by the shoot's Kubernetes version, which only the Cluster has.
	g.Expect(runMutate([]string{"-f", kcm, "--type", "aws"}, &out, &out)).To(MatchError(ContainSubstring("cluster.spec.shoot.spec.kubernetes.version: Required value")))
	g.Expect(runMutate([]string{"-f", kcm, "--type", "gcp"}, &out, &out)).To(MatchError(ContainSubstring(`no provider for infrastructure type "gcp"`)))
	g.Expect(runMutate([]string{"-f", kcm, "--type", "third", "--providers", "../../templates/testdata/providers"}, &out, &out)).To(MatchError(ContainSubstring(`provider "third" has no mutations.yaml`)))
}

func readTestObject(t *testing.T, path string, into any) {
	t.Helper()
	if err := readObject(path, into); err != nil {
		t.Fatal(err)
	}
}
