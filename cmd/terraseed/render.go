package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// runRender prints what terraform would run for an Infrastructure, like `helm template`:
// the rendered files, the tfvars, and the environment credentials would fill (redacted).
// For a ControlPlane it prints the objects that would be applied and the providerStatus.
func runRender(args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("render", flag.ContinueOnError)
	infraFile := flags.String("f", "", "the Infrastructure or ControlPlane to render (YAML or JSON)")
	clusterFile := flags.String("cluster", "", "the Cluster of the shoot (optional)")
	workloadIdentity := flags.Bool("workload-identity", false, "render for a workload identity's credentials Secret (a token and its config) instead of static keys")
	var providerDirs stringList
	flags.Var(&providerDirs, "providers", "a directory of providers that adds to or overrides the embedded ones (repeatable)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *infraFile == "" {
		return fmt.Errorf("-f is required: the Infrastructure or ControlPlane to render")
	}
	cluster, registry, err := readClusterAndProviders(*clusterFile, providerDirs)
	if err != nil {
		return err
	}
	kind, err := readKind(*infraFile)
	if err != nil {
		return err
	}
	if kind == "ControlPlane" {
		return renderControlPlane(registry, *infraFile, cluster, stdout)
	}
	if kind, ok := renderedKinds[kind]; ok {
		return renderKind(registry, kind, *infraFile, cluster, *workloadIdentity, stdout)
	}
	in := templates.Input{Infrastructure: &extensionsv1alpha1.Infrastructure{}, Cluster: cluster, WorkloadIdentity: *workloadIdentity}
	if err := readObject(*infraFile, in.Infrastructure); err != nil {
		return err
	}
	provider, err := registry.Provider(in.Infrastructure.Spec.Type)
	if err != nil {
		return err
	}
	out, err := provider.Render(in)
	if err != nil {
		return err
	}
	credentials := provider.Manifest.Credentials
	if *workloadIdentity {
		// Render refused a provider without them.
		credentials = provider.Manifest.WorkloadIdentity.Credentials
	}
	printRendered(stdout, out, in.Infrastructure.Spec.SecretRef, in.Infrastructure.Namespace, credentials)
	return nil
}

// renderedKinds are the kinds besides the Infrastructure that render from templates, by the kind
// their objects name.
var renderedKinds = map[string]renderedKind{
	"BackupBucket": {templates.KindBackupBucket, func() templates.KindObject { return &extensionsv1alpha1.BackupBucket{} }},
	"BackupEntry":  {templates.KindBackupEntry, func() templates.KindObject { return &extensionsv1alpha1.BackupEntry{} }},
	"DNSRecord":    {templates.KindDNSRecord, func() templates.KindObject { return &extensionsv1alpha1.DNSRecord{} }},
	"Bastion":      {templates.KindBastion, func() templates.KindObject { return &extensionsv1alpha1.Bastion{} }},
	"SelfHostedShootExposure": {templates.Kind("selfhostedshootexposure"), func() templates.KindObject {
		return &extensionsv1alpha1.SelfHostedShootExposure{}
	}},
}

type renderedKind struct {
	kind      templates.Kind
	newObject func() templates.KindObject
}

// renderKind prints what terraform would run for an object of a kind besides the
// Infrastructure, as for an Infrastructure.
func renderKind(registry *templates.Registry, kind renderedKind, file string, cluster *extensionsv1alpha1.Cluster, workloadIdentity bool, stdout io.Writer) error {
	obj := kind.newObject()
	if err := readObject(file, obj); err != nil {
		return err
	}
	k, err := registry.Kind(kind.kind, obj.GetExtensionSpec().Type)
	if err != nil {
		return err
	}
	out, err := k.Render(templates.KindInput{Object: obj, Cluster: cluster, WorkloadIdentity: workloadIdentity})
	if err != nil {
		return err
	}
	printRendered(stdout, out, obj.GetSecretRef(), obj.GetNamespace(), k.DeclaredCredentials(workloadIdentity))
	return nil
}

// printRendered prints the rendered files, the tfvars, and the environment the
// credentials would fill, redacted.
func printRendered(stdout io.Writer, out *templates.Rendered, secretRef corev1.SecretReference, namespace string, credentials []templates.Credential) {
	names := make([]string, 0, len(out.Files))
	for name := range out.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(stdout, "# ---- %s\n%s\n", name, out.Files[name])
	}
	fmt.Fprintf(stdout, "# ---- terraform.tfvars.json\n%s\n", out.TFVarsJSON)
	secretNamespace := secretRef.Namespace
	if secretNamespace == "" {
		secretNamespace = namespace
	}
	fmt.Fprintf(stdout, "# ---- environment (from secret %s/%s)\n", secretNamespace, secretRef.Name)
	for _, c := range credentials {
		optional := ""
		if c.Optional {
			optional = " (optional)"
		}
		value := fmt.Sprintf("<redacted: key %q>", c.Key)
		switch {
		case c.File:
			value = fmt.Sprintf("<the path of a file holding key %q>", c.Key)
		case c.Field != "":
			value = fmt.Sprintf("<redacted: field %q of key %q>", c.Field, c.Key)
		}
		if len(c.Aliases) > 0 {
			value = strings.TrimSuffix(value, ">") + fmt.Sprintf(" or %s>", strings.Join(c.Aliases, ", "))
		}
		fmt.Fprintf(stdout, "# %s=%s%s\n", c.EnvName(), value, optional)
	}
}

// readClusterAndProviders reads the optional Cluster file and loads the providers, as the
// offline commands take them.
func readClusterAndProviders(clusterFile string, providerDirs []string) (*extensionsv1alpha1.Cluster, *templates.Registry, error) {
	var cluster *extensionsv1alpha1.Cluster
	if clusterFile != "" {
		cluster = &extensionsv1alpha1.Cluster{}
		if err := readObject(clusterFile, cluster); err != nil {
			return nil, nil, err
		}
	}
	registry, err := templates.NewRegistry(providerDirs...)
	return cluster, registry, err
}

func readObject(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

// renderControlPlane prints the objects a ControlPlane would apply, as YAML documents, and
// its providerStatus.
func renderControlPlane(registry *templates.Registry, file string, cluster *extensionsv1alpha1.Cluster, stdout io.Writer) error {
	cp := &extensionsv1alpha1.ControlPlane{}
	if err := readObject(file, cp); err != nil {
		return err
	}
	provider, err := registry.Provider(cp.Spec.Type)
	if err != nil {
		return err
	}
	out, err := provider.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: cp, Cluster: cluster})
	if err != nil {
		return err
	}
	for _, obj := range out.Objects {
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "---\n%s", data)
	}
	if out.ProviderStatus != nil {
		data, err := yaml.JSONToYAML(out.ProviderStatus.Raw)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "# ---- providerStatus\n%s\n", strings.TrimSuffix(prefixLines(string(data), "# "), "\n"))
	}
	return nil
}

func prefixLines(text, prefix string) string {
	lines := strings.SplitAfter(text, "\n")
	var b strings.Builder
	for _, line := range lines {
		if line != "" {
			b.WriteString(prefix + line)
		}
	}
	return b.String()
}

// readKind reads the kind of the object in a file.
func readKind(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var meta struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return "", fmt.Errorf("decoding %s: %w", path, err)
	}
	return meta.Kind, nil
}
