package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/terraseed/terraseed/api/scheme"
	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/charts"
	"github.com/terraseed/terraseed/controller/controlplane"
	"github.com/terraseed/terraseed/controller/extension"
)

// The sample shoot that `make run` creates.
const (
	sampleNamespace = "shoot--local--dev"
	sampleName      = "infrastructure"
	sampleSecret    = "cloudprovider"
	// sampleControlPlane is the sample ControlPlane, created once the Infrastructure succeeded.
	sampleControlPlane = "control-plane"
	// sampleDNSRecord is the sample DNSRecord, the shoot's API server's domain, created
	// beside the ControlPlane.
	sampleDNSRecord = "dev-external"
)

// runLocal starts kube-apiserver and etcd on this machine with the CRDs, runs the
// controller against it with the local executor, creates a sample `local` Infrastructure
// and keeps everything up until ctx ends.
func runLocal(ctx context.Context, args []string) error {
	o, assets, sample, err := parseLocalFlags(args)
	if err != nil {
		return err
	}
	logPath, closeLog, err := logToFile(o.workDir)
	if err != nil {
		return err
	}
	defer closeLog()
	crds, err := embeddedCRDs()
	if err != nil {
		return err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: crds}
	fmt.Println("starting the local control plane (kube-apiserver + etcd)...")
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the local control plane: %w", err)
	}
	defer func() {
		fmt.Println("stopping the local control plane...")
		if err := env.Stop(); err != nil {
			fmt.Println("stopping the local control plane:", err)
			return
		}
		fmt.Println("stopped")
	}()
	kubeconfig, kubeconfigPath, err := writeAdminKubeconfig(env, o.workDir)
	if err != nil {
		return err
	}
	fmt.Printf("control plane is up; %d CRDs installed; export KUBECONFIG=%s\n", len(crds), kubeconfigPath)

	mgr, err := newManager(ctx, cfg, o)
	if err != nil {
		return err
	}
	stopTracing, err := o.startTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()
	managerDone := make(chan error, 1)
	go func() { managerDone <- mgr.Start(ctx) }()
	fmt.Printf("terraseed is running with the local executor; its log: %s\n", logPath)
	if !sample.none {
		if err := runSample(ctx, cfg, kubeconfig, sample.workloadIdentity, managerDone); err != nil {
			return err
		}
		printNextSteps(kubeconfigPath)
	}
	fmt.Println("press Ctrl-C to stop")
	select {
	case <-ctx.Done():
		if err := <-managerDone; err != nil {
			return err
		}
		fmt.Println("interrupted: stopping terraseed")
		return nil
	case err := <-managerDone:
		return err
	}
}

// parseLocalFlags reads the manager's flags with the defaults of a local run, and the
// local run's own.
func parseLocalFlags(args []string) (o managerOptions, assets string, sample sampleOptions, err error) {
	flags := flag.NewFlagSet("local", flag.ContinueOnError)
	setUsage(flags, "terraseed local [flags]")
	flags.StringVar(&assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory holding kube-apiserver and etcd (make run sets it)")
	flags.BoolVar(&sample.none, "no-sample", false, "do not create the sample Infrastructure")
	flags.BoolVar(&sample.workloadIdentity, "workload-identity", false, "the sample's credentials are a workload identity's: a ServiceAccount token, renewed at half its lifetime as gardenlet does")
	o.bind(flags)
	for name, value := range map[string]string{"executor": "local", "metrics-bind-address": "127.0.0.1:8080", "metrics-secure": "false", "health-probe-bind-address": "127.0.0.1:8081",
		// The local API server calls the control-plane webhook on this machine.
		"webhook-mode": "url", "webhook-namespace": "default"} {
		if err := flags.Set(name, value); err != nil {
			return o, "", sample, err
		}
	}
	if err := flags.Parse(args); err != nil {
		return o, "", sample, err
	}
	if assets == "" {
		return o, "", sample, errors.New("--assets (or KUBEBUILDER_ASSETS) is required: start with `make run`, which builds the control plane binaries")
	}
	return o, assets, sample, nil
}

// sampleOptions say which sample `terraseed local` creates.
type sampleOptions struct {
	none, workloadIdentity bool
}

// logToFile sends the controller's log to a file in dir: the terminal shows progress.
func logToFile(dir string) (path string, closeLog func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "controller.log")
	logFile, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", nil, err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	return path, func() { _ = logFile.Close() }, nil
}

// runSample creates the sample Infrastructure and, once it succeeded, the sample
// ControlPlane, following each until it settles.
func runSample(ctx context.Context, cfg *rest.Config, kubeconfig []byte, workloadIdentity bool, managerDone <-chan error) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNamespace, Name: sampleSecret},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	if workloadIdentity {
		if secret, err = sampleWorkloadIdentity(ctx, cfg, c); err != nil {
			return err
		}
	}
	if err := createSample(ctx, c, secret); err != nil {
		return err
	}
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := followSample(ctx, c, managerDone, client.ObjectKey{Namespace: sampleNamespace, Name: sampleName}, infra); err != nil {
		return err
	}
	if !succeeded(infra) {
		return nil
	}
	printStatus(infra)
	if err := createSampleControlPlane(ctx, c, infra); err != nil {
		return err
	}
	cp := &extensionsv1alpha1.ControlPlane{}
	if err := followSample(ctx, c, managerDone, client.ObjectKey{Namespace: sampleNamespace, Name: sampleControlPlane}, cp); err != nil {
		return err
	}
	if succeeded(cp) {
		printControlPlane(ctx, c, cp)
	}
	record, err := createSampleDNSRecord(ctx, c)
	if err != nil {
		return err
	}
	if err := followSample(ctx, c, managerDone, client.ObjectKeyFromObject(record), record); err != nil {
		return err
	}
	if succeeded(record) {
		printDNSRecord(ctx, c, record)
	}
	return nil
}

// createSampleDNSRecord creates the sample DNSRecord: the shoot's API server's name,
// which the local provider records as a ConfigMap of the shoot namespace.
func createSampleDNSRecord(ctx context.Context, c client.Client) (*extensionsv1alpha1.DNSRecord, error) {
	record := &extensionsv1alpha1.DNSRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNamespace, Name: sampleDNSRecord},
		Spec: extensionsv1alpha1.DNSRecordSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"namespace":"` + sampleNamespace + `"}`)}},
			SecretRef:   corev1.SecretReference{Name: sampleSecret, Namespace: sampleNamespace},
			Name:        "api.dev.local.example.com",
			RecordType:  extensionsv1alpha1.DNSRecordTypeA,
			Values:      []string{"192.0.2.10"},
		},
	}
	if err := c.Create(ctx, record); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the sample DNSRecord: %w", err)
	}
	fmt.Printf("created the sample DNSRecord %s/%s (%s A %s)\n", sampleNamespace, sampleDNSRecord, record.Spec.Name, record.Spec.Values[0])
	return record, nil
}

// printDNSRecord prints the zone the sample DNSRecord found and the record the local
// provider made for it.
func printDNSRecord(ctx context.Context, c client.Client, record *extensionsv1alpha1.DNSRecord) {
	fmt.Printf("  zone: %s\n", ptr.Deref(record.Status.Zone, ""))
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.InNamespace(sampleNamespace), client.HasLabels{"dns.terraseed.io/zone"}); err != nil {
		return
	}
	for _, cm := range list.Items {
		fmt.Printf("  record: ConfigMap %s/%s: %s %s %s (ttl %s)\n", cm.Namespace, cm.Name, cm.Data["name"], cm.Data["type"], cm.Data["values"], cm.Data["ttl"])
	}
}

func writeAdminKubeconfig(env *envtest.Environment, dir string) ([]byte, string, error) {
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, "", fmt.Errorf("creating the admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, "", fmt.Errorf("writing the kubeconfig: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, "", err
	}
	return kubeconfig, path, nil
}

// createSample creates a shoot namespace with the kubeconfig Secret, its Cluster and a
// `local` Infrastructure whose resources land in this same control plane.
func createSample(ctx context.Context, c client.Client, secret *corev1.Secret) error {
	shoot, _ := json.Marshal(map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
		"metadata": map[string]any{"name": "dev", "namespace": "garden-local"},
		"spec": map[string]any{"networking": map[string]any{
			"nodes": "10.250.0.0/16", "pods": "100.96.0.0/11", "services": "100.64.0.0/13",
		}},
	})
	providerConfig, _ := json.Marshal(map[string]any{
		"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "InfrastructureConfig",
		"networks": map[string]any{
			"cidr": "10.250.0.0/16",
			"zones": []any{
				map[string]any{"name": "zone-a", "workers": "10.250.0.0/19"},
				map[string]any{"name": "zone-b", "workers": "10.250.32.0/19"},
			},
		},
	})
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sampleNamespace}},
		secret,
		&extensionsv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: sampleNamespace},
			Spec: extensionsv1alpha1.ClusterSpec{
				Shoot:        runtime.RawExtension{Raw: shoot},
				Seed:         &runtime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed","metadata":{"name":"local"}}`)},
				CloudProfile: runtime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"CloudProfile","metadata":{"name":"local"}}`)},
			},
		},
		&extensionsv1alpha1.Infrastructure{
			ObjectMeta: metav1.ObjectMeta{Namespace: sampleNamespace, Name: sampleName},
			Spec: extensionsv1alpha1.InfrastructureSpec{
				DefaultSpec:  extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: &runtime.RawExtension{Raw: providerConfig}},
				Region:       "local-1",
				SecretRef:    corev1.SecretReference{Name: sampleSecret, Namespace: sampleNamespace},
				SSHPublicKey: []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNhbXBsZQ terraseed@local"),
			},
		},
	}
	for _, obj := range objects {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the sample %T %s: %w", obj, obj.GetName(), err)
		}
	}
	fmt.Printf("created the sample Infrastructure %s/%s (type local)\n", sampleNamespace, sampleName)
	return nil
}

// followSample prints each change of the sample's last operation until it is final.
func followSample(ctx context.Context, c client.Client, managerDone <-chan error, key client.ObjectKey, obj extension.Object) error {
	kind := "Infrastructure"
	switch obj.(type) {
	case *extensionsv1alpha1.ControlPlane:
		kind = "ControlPlane"
	case *extensionsv1alpha1.DNSRecord:
		kind = "DNSRecord"
	}
	var shown string
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-managerDone:
			return fmt.Errorf("the controller stopped: %w", err)
		case <-ticker.C:
		}
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		status := obj.GetExtensionStatus()
		last := status.LastOperation
		if last == nil {
			continue
		}
		line := fmt.Sprintf("  %s %s %s (%d%%): %s", kind, last.Type, last.State, last.Progress, last.Description)
		if line != shown {
			fmt.Println(line)
			shown = line
		}
		switch last.State {
		case extensionsv1alpha1.LastOperationStateSucceeded:
			return nil
		case extensionsv1alpha1.LastOperationStateError, extensionsv1alpha1.LastOperationStateFailed:
			if status.LastError != nil {
				fmt.Printf("  codes: %v\n", status.LastError.Codes)
			}
			return nil
		}
	}
}

func succeeded(obj extension.Object) bool {
	last := obj.GetExtensionStatus().LastOperation
	return last != nil && last.State == extensionsv1alpha1.LastOperationStateSucceeded
}

// createSampleControlPlane creates the sample's ControlPlane as gardenlet does after the
// Infrastructure: with the Infrastructure's providerStatus.
func createSampleControlPlane(ctx context.Context, c client.Client, infra *extensionsv1alpha1.Infrastructure) error {
	cp := &extensionsv1alpha1.ControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNamespace, Name: sampleControlPlane},
		Spec: extensionsv1alpha1.ControlPlaneSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"replicas":1}}`)}},
			Region:                       "local-1",
			SecretRef:                    corev1.SecretReference{Name: sampleSecret, Namespace: sampleNamespace},
			InfrastructureProviderStatus: infra.Status.ProviderStatus,
		},
	}
	if err := c.Create(ctx, cp); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the sample ControlPlane: %w", err)
	}
	fmt.Printf("created the sample ControlPlane %s/%s (type local)\n", sampleNamespace, sampleControlPlane)
	return nil
}

// printControlPlane prints what the ControlPlane deployed and its health.
func printControlPlane(ctx context.Context, c client.Client, cp *extensionsv1alpha1.ControlPlane) {
	deployments := &appsv1.DeploymentList{}
	configMaps := &corev1.ConfigMapList{}
	owned := client.MatchingLabels{controlplane.OwnerLabelGroup + "/name": cp.Name}
	var names []string
	if c.List(ctx, deployments, client.InNamespace(cp.Namespace), owned) == nil {
		for _, d := range deployments.Items {
			names = append(names, "deployment/"+d.Name)
		}
	}
	if c.List(ctx, configMaps, client.InNamespace(cp.Namespace), owned) == nil {
		for _, m := range configMaps.Items {
			names = append(names, "configmap/"+m.Name)
		}
	}
	fmt.Printf("  deployed: %s\n", strings.Join(names, ", "))
	fmt.Println("  (no controller manager or node runs here: the Deployment gets no pods, and the ControlPlaneHealthy condition says it is unavailable)")
}

func printStatus(infra *extensionsv1alpha1.Infrastructure) {
	status := map[string]any{}
	if infra.Status.ProviderStatus != nil {
		var providerStatus any
		_ = json.Unmarshal(infra.Status.ProviderStatus.Raw, &providerStatus)
		status["providerStatus"] = providerStatus
	}
	if infra.Status.NodesCIDR != nil {
		status["nodesCIDR"] = *infra.Status.NodesCIDR
	}
	out, _ := yaml.Marshal(map[string]any{"status": status})
	fmt.Printf("\n%s\n", out)
}

func printNextSteps(kubeconfigPath string) {
	fmt.Printf(`inspect it:
  export KUBECONFIG=%[1]s
  kubectl get infrastructures -A
  kubectl get -n %[2]s infrastructure %[3]s -o yaml
  kubectl get namespaces,networkpolicies -A
  kubectl get -n %[2]s controlplane %[4]s -o yaml
  kubectl get -n %[2]s deployments,services,configmaps -l controlplane.terraseed.gardener.cloud/name=%[4]s
  kubectl get -n %[2]s dnsrecord %[5]s -o yaml
  kubectl get -n %[2]s configmaps -l dns.terraseed.io/zone
delete it (terraform destroys what it created):
  kubectl delete -n %[2]s dnsrecord %[5]s
  kubectl delete -n %[2]s controlplane %[4]s
  kubectl delete -n %[2]s infrastructure %[3]s
`, kubeconfigPath, sampleNamespace, sampleName, sampleControlPlane, sampleDNSRecord)
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
