package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The chart's release, as an operator installs it on a seed.
const (
	releaseName      = "terraseed"
	releaseNamespace = "terraseed-system"
	// terraformerAccount is the chart's default ServiceAccount for run pods.
	terraformerAccount = "terraseed-terraformer"
)

// helm runs the helm binary `make tools` built against the node, with its own cache and
// configuration directories.
func helm(ctx context.Context, args ...string) (string, error) {
	binary := os.Getenv("HELM")
	if binary == "" {
		return "", fmt.Errorf("HELM is not set: run `make test`, or eval \"$(make -s env)\" first")
	}
	home, err := os.MkdirTemp("", "terraseed-e2e-helm-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	cmd := exec.CommandContext(ctx, binary, append(args, "--kubeconfig", node.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// installChart installs the chart with the assembled image, as an operator does, and
// waits until its Deployment is available: both replicas running, their readiness
// probes passing.
func installChart(ctx context.Context) error {
	_, err := helm(ctx, "install", releaseName, filepath.Join(repoRoot, "charts", "terraseed"),
		"--namespace", releaseNamespace, "--create-namespace",
		"--set", "image.repository="+imageRepository, "--set", "image.tag="+imageTag,
		"--set", "logLevel=debug",
		// The node's images, which the local control plane runs, are under localhost/.
		"--set", "controlPlane.allowedImages={registry.k8s.io/,localhost/}",
		// The tests' Infrastructures and ControlPlanes are of the local provider; aws is
		// served too, for its control-plane webhook.
		"--set", "providerTypes={aws,local}",
		// The tests' namespaces are no shoot namespaces of Gardener's: run pods, and the
		// controller's writes, anywhere.
		"--set", "terraformer.admissionPolicy.namespaceLabels.gardener\\.cloud/role=null",
		"--set", "admissionPolicy.namespaceLabels.gardener\\.cloud/role=null",
		"--wait", "--timeout", "10m")
	return err
}
