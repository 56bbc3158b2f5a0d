package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/terraseed/terraseed/charts"
)

// runLocal starts kube-apiserver and etcd on this machine, installs the CRDs, writes an
// admin kubeconfig and keeps the control plane up until ctx ends.
func runLocal(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("local", flag.ContinueOnError)
	assets := flags.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory holding kube-apiserver and etcd (make run sets it)")
	stateDir := flags.String("state-dir", filepath.Join(os.TempDir(), "terraseed-local"), "directory for the kubeconfig")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *assets == "" {
		return errors.New("--assets (or KUBEBUILDER_ASSETS) is required: start with `make run`, which builds the control plane binaries")
	}

	crds, err := embeddedCRDs()
	if err != nil {
		return err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: *assets, CRDs: crds}
	fmt.Println("starting the local control plane (kube-apiserver + etcd)...")
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("starting the local control plane: %w", err)
	}
	defer func() {
		fmt.Println("stopping the local control plane...")
		_ = env.Stop()
	}()

	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("creating the admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	if err := os.MkdirAll(*stateDir, 0o700); err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(*stateDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	fmt.Printf("control plane is up; %d CRDs installed\n", len(crds))
	fmt.Printf("  export KUBECONFIG=%s\n", kubeconfigPath)
	fmt.Println("  kubectl get infrastructures -A")
	fmt.Println("press Ctrl-C to stop")
	<-ctx.Done()
	return nil
}

func embeddedCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(charts.CRDs, "terraseed/crds/*.yaml")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		data, err := charts.CRDs.ReadFile(file)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", file, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
