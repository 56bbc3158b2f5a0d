package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerManager is a kube-controller-manager running against the environment, so that
// workloads behave as in a cluster: Deployments get ReplicaSets and ReplicaSets get Pods.
// No node runs them: pods stay Pending.
type ControllerManager struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// StartControllerManager runs the kube-controller-manager `make tools` built
// ($TERRASEED_NODE_BINARIES) with the given controllers, and waits until it works.
func (e *Environment) StartControllerManager(controllers ...string) (*ControllerManager, error) {
	binaries := os.Getenv("TERRASEED_NODE_BINARIES")
	if binaries == "" {
		return nil, errors.New("TERRASEED_NODE_BINARIES is not set: run the tests with `make test`, or `make tools` and `eval \"$(make -s env)\"` first")
	}
	binary := filepath.Join(binaries, "kube-controller-manager")
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("%w (run `make tools`)", err)
	}
	dir, err := os.MkdirTemp("", "terraseed-kcm-")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := e.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "kube-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(binary,
		"--kubeconfig", kubeconfigPath,
		"--authentication-kubeconfig", kubeconfigPath,
		"--authorization-kubeconfig", kubeconfigPath,
		"--controllers", strings.Join(controllers, ","),
		// Serving on a free port: nothing reads it, and fixed ports collide between packages.
		"--bind-address", "127.0.0.1", "--secure-port", "0",
		"--cert-dir", dir,
		"--leader-elect=false", "--v=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	// It dies with the test process, should that die without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cm := &ControllerManager{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		close(cm.done)
	}()
	if err := e.waitForReplicaSets(cm); err != nil {
		_ = cm.Stop()
		return nil, err
	}
	return cm, nil
}

// waitForReplicaSets proves the controller manager works: a Deployment gets its ReplicaSet.
func (e *Environment) waitForReplicaSets(cm *ControllerManager) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	labels := map[string]string{"app": "probe"}
	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager-probe", Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
			},
		},
	}
	if err := e.Client.Create(ctx, probe); err != nil {
		return err
	}
	defer func() { _ = e.Client.Delete(context.Background(), probe) }()
	for {
		list := &appsv1.ReplicaSetList{}
		if err := e.Client.List(ctx, list, client.InNamespace(metav1.NamespaceDefault), client.MatchingLabels(labels)); err == nil && len(list.Items) > 0 {
			return nil
		}
		select {
		case <-cm.done:
			return fmt.Errorf("kube-controller-manager exited; its log: %s", cm.log)
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager made no ReplicaSet within 2m; its log: %s", cm.log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops the controller manager and waits for it.
func (cm *ControllerManager) Stop() error {
	select {
	case <-cm.done:
		return nil
	default:
	}
	_ = cm.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-cm.done:
	case <-time.After(30 * time.Second):
		_ = cm.cmd.Process.Kill()
		<-cm.done
	}
	_ = os.RemoveAll(filepath.Dir(cm.log))
	return nil
}
