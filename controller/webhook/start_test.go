package webhook_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/test/testenv"
)

// Gardener's kube-apiserver and kube-controller-manager Deployments of today, written into
// an aws and a local shoot namespace whose Cluster has the Kubernetes version `make tools`
// built, are stored as the webhook mutates them; the real binaries of that version then
// run with the stored command lines, environment and mounted files (the Secrets and
// ConfigMaps of the namespace written where the pod mounts them) until kube-apiserver is
// ready and kube-controller-manager healthy and at work.
//
// What a pod on a seed has and this machine has not is supplied, and only that: the
// binaries are the built ones instead of the image's; every mount path in a flag or an
// environment variable is the directory the volume was written to; the pod's network is
// 127.0.0.1 on free ports (--secure-port, --bind-address, --advertise-address); the
// seed's etcd is envtest's (--etcd-servers, under an --etcd-prefix of the namespace).
func TestMutatedControlPlaneStarts(t *testing.T) {
	apiserverBinary := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-apiserver")
	controllerManagerBinary := filepath.Join(os.Getenv("TERRASEED_NODE_BINARIES"), "kube-controller-manager")
	for _, binary := range []string{apiserverBinary, controllerManagerBinary} {
		if _, err := os.Stat(binary); err != nil {
			t.Fatalf("%v: run `make tools` and `eval \"$(make -s env)\"` first", err)
		}
	}
	version := binaryVersion(t, apiserverBinary)
	NewWithT(t).Expect(binaryVersion(t, controllerManagerBinary)).To(Equal(version))
	startWebhook(t)

	for _, c := range []struct {
		provider string
		// The ControlPlane's providerConfig and its Infrastructure's providerStatus.
		config, infrastructureStatus string
		// What the mutation of that version must have done, beyond starting.
		controllerManager []string
		notApiserver      []string
	}{
		{
			provider:             "aws",
			config:               `{"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "ControlPlaneConfig"}`,
			infrastructureStatus: `{"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "InfrastructureStatus", "vpc": {"id": "vpc-1234", "subnets": [{"id": "subnet-acbd1234", "purpose": "nodes", "zone": "eu-west-1a"}]}}`,
			controllerManager:    []string{"--cloud-provider=external"},
			notApiserver:         []string{"--cloud-provider", "--cloud-config", "PersistentVolumeLabel"},
		},
		{
			provider:             "local",
			config:               `{"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "ControlPlaneConfig"}`,
			infrastructureStatus: `{"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "InfrastructureStatus", "namespace": "shoot--dev--local--infrastructure", "zones": [{"name": "zone-a", "workers": "10.250.0.0/19"}]}`,
			controllerManager:    []string{"--cloud-provider=external", "--cluster-name="},
			notApiserver:         []string{"--cloud-provider"},
		},
	} {
		t.Run(c.provider, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := shootNamespace(t, c.provider)
			createCluster(t, ns, `{"spec": {"kubernetes": {"version": "`+version+`"}, "region": "eu-west-1"}}`)
			writeControlPlaneConfigMaps(t, ns, c.provider, c.config, c.infrastructureStatus)
			pki := newShootPKI(t)
			apiserverPort, controllerManagerPort := testenv.FreePort(t), testenv.FreePort(t)
			pki.writeSecrets(t, ns, apiserverPort)

			kas, err := create(ctx, ns, readDeployment(t, "gardener-kube-apiserver.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			kcm, err := create(ctx, ns, readDeployment(t, "gardener-kube-controller-manager.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			kasLine, kcmLine := commandLine(kas), commandLine(kcm)
			for _, want := range c.controllerManager {
				g.Expect(kcmLine).To(ContainElement(HavePrefix(want)))
			}
			if c.provider == "local" {
				g.Expect(kcmLine).To(ContainElement("--cluster-name=" + ns))
			}
			for _, unwanted := range c.notApiserver {
				g.Expect(strings.Join(kasLine, " ")).NotTo(ContainSubstring(unwanted))
			}

			apiserver := startContainer(t, ns, kas, apiserverBinary, map[string]string{
				"--etcd-servers":      env.EtcdURL(),
				"--etcd-prefix":       "/" + ns,
				"--secure-port":       strconv.Itoa(apiserverPort),
				"--bind-address":      "127.0.0.1",
				"--advertise-address": podIP(t),
			})
			admin := pki.restConfig(t, apiserverPort, "admin", "system:masters")
			g.Eventually(func(g Gomega) {
				apiserver.stopIfExited()
				g.Expect(get(g, admin, "/readyz")).To(Equal("ok"))
			}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), apiserver.tail)

			controllerManager := startContainer(t, ns, kcm, controllerManagerBinary, map[string]string{
				"--secure-port":  strconv.Itoa(controllerManagerPort),
				"--bind-address": "127.0.0.1",
			})
			health := &rest.Config{Host: "https://127.0.0.1:" + strconv.Itoa(controllerManagerPort), TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM}}
			g.Eventually(func(g Gomega) {
				controllerManager.stopIfExited()
				g.Expect(get(g, health, "/healthz")).To(Equal("ok"))
			}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), controllerManager.tail)

			// At work on the shoot's kube-apiserver: the service-account controller made
			// the default namespace's ServiceAccount, with its own credentials.
			shoot, err := client.New(admin, client.Options{Scheme: env.Scheme})
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func(g Gomega) {
				controllerManager.stopIfExited()
				sa := &corev1.ServiceAccount{}
				g.Expect(shoot.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "default"}, sa)).To(Succeed())
			}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), controllerManager.tail)
			t.Logf("%s %s: kube-apiserver ready, kube-controller-manager healthy", c.provider, version)
		})
	}
}

// writeControlPlaneConfigMaps stores the ConfigMaps the provider's ControlPlane renders
// into the namespace (the cloud-provider config), as the ControlPlane controller does
// before Gardener deploys the control plane.
func writeControlPlaneConfigMaps(t *testing.T, namespace, providerType, config, infrastructureStatus string) {
	t.Helper()
	g := NewWithT(t)
	registry, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	p, err := registry.Provider(providerType)
	g.Expect(err).NotTo(HaveOccurred())
	rendered, err := p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: &extensionsv1alpha1.ControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "control-plane"},
		Spec: extensionsv1alpha1.ControlPlaneSpec{
			DefaultSpec:                  extensionsv1alpha1.DefaultSpec{Type: providerType, ProviderConfig: &runtime.RawExtension{Raw: []byte(config)}},
			Region:                       "eu-west-1",
			SecretRef:                    corev1.SecretReference{Namespace: namespace, Name: "cloudprovider"},
			InfrastructureProviderStatus: &runtime.RawExtension{Raw: []byte(infrastructureStatus)},
		},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	configMaps := 0
	for _, o := range rendered.Objects {
		if o.GetKind() == "ConfigMap" {
			g.Expect(env.Client.Create(context.Background(), o)).To(Succeed())
			configMaps++
		}
	}
	g.Expect(configMaps).To(BeNumerically(">", 0))
}

// binaryVersion is the Kubernetes version a binary was built from: the version of the
// k8s.io/kubernetes module in its build information, without the v (the binary's own
// --version is only stamped where the build set it).
func binaryVersion(t *testing.T, binary string) string {
	t.Helper()
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatalf("%s: %v", binary, err)
	}
	if info.Main.Path == "k8s.io/kubernetes" {
		return strings.TrimPrefix(info.Main.Version, "v")
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/kubernetes" {
			return strings.TrimPrefix(dep.Version, "v")
		}
	}
	t.Fatalf("%s was not built from the k8s.io/kubernetes module", binary)
	return ""
}

func commandLine(d *appsv1.Deployment) []string {
	c := d.Spec.Template.Spec.Containers[0]
	return append(slices.Clone(c.Command), c.Args...)
}

func get(g Gomega, config *rest.Config, path string) string {
	transport, err := rest.TransportFor(config)
	g.Expect(err).NotTo(HaveOccurred())
	httpClient := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	resp, err := httpClient.Get(config.Host + path)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	return string(body)
}

// process is a binary run as a stored Deployment's only container.
type process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// exited is "" while the process runs, else how it ended.
func (p *process) exited() string {
	select {
	case <-p.done:
		return fmt.Sprintf("exited: %v", p.cmd.ProcessState)
	default:
		return ""
	}
}

// stopIfExited ends an Eventually at once when the process is gone.
func (p *process) stopIfExited() {
	if e := p.exited(); e != "" {
		StopTrying(filepath.Base(p.cmd.Path) + " " + e).Now()
	}
}

// podIP is an address of this machine outside the loopback range, as a pod's is: the
// endpoint reconciler refuses to advertise a loopback address.
func podIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no IPv4 address outside the loopback range to advertise")
	return ""
}

// tail is the end of the process's log, for a failure's message.
func (p *process) tail() string {
	data, _ := os.ReadFile(p.log)
	if len(data) > 8<<10 {
		data = data[len(data)-8<<10:]
	}
	return fmt.Sprintf("%s; the end of its log:\n%s", p.cmd.Path, data)
}

// startContainer runs binary with the command line and environment of the Deployment's
// first container as stored, its volumes written from the namespace's objects into a
// directory each, and every mount path replaced by that directory; set replaces or adds
// the flags of the pod's network and of the seed's etcd.
func startContainer(t *testing.T, namespace string, d *appsv1.Deployment, binary string, set map[string]string) *process {
	t.Helper()
	pod := d.Spec.Template.Spec
	g := NewWithT(t)
	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	root := t.TempDir()
	volumes := writeVolumes(t, namespace, pod.Volumes, root)

	// Longest mount paths first, so that a nested mount wins.
	mounts := slices.Clone(c.VolumeMounts)
	slices.SortFunc(mounts, func(a, b corev1.VolumeMount) int { return len(b.MountPath) - len(a.MountPath) })
	inPod := func(value string) string {
		for _, m := range mounts {
			g.Expect(m.SubPath).To(BeEmpty(), "subPath mounts are not supported here")
			dir, ok := volumes[m.Name]
			g.Expect(ok).To(BeTrue(), "mount %s names no volume of the pod", m.Name)
			if value == m.MountPath || strings.HasPrefix(value, m.MountPath+"/") {
				return dir + strings.TrimPrefix(value, m.MountPath)
			}
		}
		return value
	}

	line := commandLine(d)[1:]
	var args []string
	for _, arg := range line {
		name, value, hasValue := strings.Cut(arg, "=")
		if _, replaced := set[name]; replaced {
			continue
		}
		if hasValue {
			arg = name + "=" + inPod(value)
		} else {
			arg = inPod(arg)
		}
		args = append(args, arg)
	}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		args = append(args, name+"="+set[name])
	}

	environment := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	for _, e := range c.Env {
		value := inPod(e.Value)
		if from := e.ValueFrom; from != nil {
			switch {
			case from.SecretKeyRef != nil:
				secret := &corev1.Secret{}
				g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: from.SecretKeyRef.Name}, secret)).To(Succeed())
				value = string(secret.Data[from.SecretKeyRef.Key])
			case from.ConfigMapKeyRef != nil:
				cm := &corev1.ConfigMap{}
				g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: from.ConfigMapKeyRef.Name}, cm)).To(Succeed())
				value = cm.Data[from.ConfigMapKeyRef.Key]
			default:
				t.Fatalf("env %s: only secretKeyRef and configMapKeyRef are supported here", e.Name)
			}
		}
		environment = append(environment, e.Name+"="+value)
	}

	logPath := filepath.Join(root, c.Name+".log")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	defer logFile.Close()
	cmd := exec.Command(binary, args...)
	cmd.Env, cmd.Dir = environment, root
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.Expect(cmd.Start()).To(Succeed())
	p := &process{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Log(p.tail())
		}
	})
	t.Logf("started %s %s", filepath.Base(binary), strings.Join(args, " "))
	return p
}

// writeVolumes writes each volume of the pod from the namespace's Secrets and ConfigMaps
// into a directory of root, as the kubelet would mount it, and returns the directories by
// volume name.
func writeVolumes(t *testing.T, namespace string, volumes []corev1.Volume, root string) map[string]string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	secret := func(name string) map[string][]byte {
		s := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)).To(Succeed(), "the pod mounts Secret %s", name)
		return s.Data
	}
	configMap := func(name string) map[string][]byte {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)).To(Succeed(), "the pod mounts ConfigMap %s", name)
		data := map[string][]byte{}
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		return data
	}
	write := func(dir string, data map[string][]byte, items []corev1.KeyToPath) {
		if len(items) == 0 {
			for key := range data {
				items = append(items, corev1.KeyToPath{Key: key, Path: key})
			}
		}
		for _, item := range items {
			value, ok := data[item.Key]
			g.Expect(ok).To(BeTrue(), "key %s", item.Key)
			path := filepath.Join(dir, item.Path)
			g.Expect(os.MkdirAll(filepath.Dir(path), 0o700)).To(Succeed())
			g.Expect(os.WriteFile(path, value, 0o600)).To(Succeed())
		}
	}
	dirs := map[string]string{}
	for _, v := range volumes {
		dir := filepath.Join(root, "volumes", v.Name)
		g.Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
		switch {
		case v.Secret != nil:
			write(dir, secret(v.Secret.SecretName), v.Secret.Items)
		case v.ConfigMap != nil:
			write(dir, configMap(v.ConfigMap.Name), v.ConfigMap.Items)
		case v.Projected != nil:
			for _, source := range v.Projected.Sources {
				switch {
				case source.Secret != nil:
					write(dir, secret(source.Secret.Name), source.Secret.Items)
				case source.ConfigMap != nil:
					write(dir, configMap(source.ConfigMap.Name), source.ConfigMap.Items)
				default:
					t.Fatalf("volume %s: only secret and configMap projections are supported here", v.Name)
				}
			}
		case v.EmptyDir != nil:
		default:
			t.Fatalf("volume %s: only secret, configMap, projected and emptyDir volumes are supported here", v.Name)
		}
		dirs[v.Name] = dir
	}
	return dirs
}

// shootPKI is what Gardener's secrets manager keeps in a shoot namespace for the control
// plane: one CA, the servers' and clients' certificates, the service-account key.
type shootPKI struct {
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	caKeyP []byte
}

func newShootPKI(t *testing.T) *shootPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &shootPKI{ca: ca, caKey: key, caPEM: pemBlock("CERTIFICATE", der), caKeyP: ecKeyPEM(t, key)}
}

// issue returns a certificate and key signed by the CA, for a server (with the IPs and
// names) or a client (with the organizations as groups).
func (p *shootPKI) issue(t *testing.T, name string, organizations []string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	template := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name, Organization: organizations},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		template.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		template.DNSNames = []string{"localhost", name}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("CERTIFICATE", der), ecKeyPEM(t, key)
}

// restConfig reaches the shoot's kube-apiserver as a client of the CA.
func (p *shootPKI) restConfig(t *testing.T, port int, user string, groups ...string) *rest.Config {
	t.Helper()
	cert, key := p.issue(t, user, groups, false)
	return &rest.Config{Host: "https://127.0.0.1:" + strconv.Itoa(port), TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM, CertData: cert, KeyData: key}}
}

// writeSecrets writes the Secrets Gardener's Deployments mount into the namespace.
func (p *shootPKI) writeSecrets(t *testing.T, namespace string, apiserverPort int) {
	t.Helper()
	g := NewWithT(t)
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	saKeyPEM := pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))
	apiserverCert, apiserverKey := p.issue(t, "kube-apiserver", nil, true)
	kcmCert, kcmKey := p.issue(t, "kube-controller-manager", nil, true)
	clientCert, clientKey := p.issue(t, "system:kube-controller-manager", nil, false)
	encryptionKey := make([]byte, 32)
	_, _ = rand.Read(encryptionKey)
	kubeconfig, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "shoot",
		"clusters": []any{map[string]any{"name": "shoot", "cluster": map[string]any{
			"server": "https://127.0.0.1:" + strconv.Itoa(apiserverPort), "certificate-authority-data": p.caPEM}}},
		"users": []any{map[string]any{"name": "kube-controller-manager", "user": map[string]any{
			"client-certificate-data": clientCert, "client-key-data": clientKey}}},
		"contexts": []any{map[string]any{"name": "shoot", "context": map[string]any{"cluster": "shoot", "user": "kube-controller-manager"}}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	encryption := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc:
      keys:
      - name: key1
        secret: %s
  - identity: {}
`, base64.StdEncoding.EncodeToString(encryptionKey))
	for name, data := range map[string]map[string][]byte{
		"ca":                    {"ca.crt": p.caPEM, "ca.key": p.caKeyP},
		"ca-client":             {"ca.crt": p.caPEM},
		"service-account-key":   {"id_rsa": saKeyPEM},
		"kube-apiserver-server": {"tls.crt": apiserverCert, "tls.key": apiserverKey},
		"kube-apiserver-etcd-encryption-configuration": {"encryption-configuration.yaml": []byte(encryption)},
		"kube-controller-manager-server":               {"tls.crt": kcmCert, "tls.key": kcmKey},
		"generic-token-kubeconfig":                     {"kubeconfig": kubeconfig},
	} {
		g.Expect(env.Client.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data})).To(Succeed())
	}
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func ecKeyPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("EC PRIVATE KEY", der)
}
