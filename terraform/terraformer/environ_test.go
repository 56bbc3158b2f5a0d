package terraformer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
)

// A run pod's terraformer, given its requested token in its environment as the pod
// executor gives it, leaves it in no process's environment while terraform runs: not in
// its own /proc/<pid>/environ, which os.Unsetenv does not change, nor in those of
// terraform, the provider plugin and the provisioner's shell below it. Nor can they,
// of the same user and with no capabilities, as in a run pod, read the terraformer's
// environment or memory, which holds the token for the run's API requests; what they
// started themselves they can. The run still reaches the API server with the token.
func TestARunPodsTokenIsInNoProcessEnvironmentAndTerraformCannotReadTheTerraformersMemory(t *testing.T) {
	g := NewWithT(t)
	// A run pod's container: all capabilities dropped, no privilege escalation.
	runPodUser := []string{"setpriv", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"}
	if _, err := exec.LookPath(runPodUser[0]); err != nil {
		t.Skipf("setpriv (Debian's util-linux) is absent, which drops a run pod's capabilities here: %v", err)
	}
	f := newFixture(t, 3)
	gate := f.NewGate(1)
	f.WriteChainConfig(3, gate)
	token := runPodToken(t, f.Namespace)
	apiServer, err := url.Parse(env.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	host, port, err := net.SplitHostPort(apiServer.Host)
	g.Expect(err).NotTo(HaveOccurred())
	cmd, _ := f.startTerraformerWith(runPodUser, run.Apply, nil, []string{
		"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port,
		EnvAPIToken + "=" + token, EnvAPICA + "=" + string(env.Config.CAData),
		EnvAPIStartBy + "=" + time.Now().Add(time.Minute).UTC().Format(time.RFC3339),
	})
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	gate.WaitUntilReached()

	terraformer := cmd.Process.Pid
	var commands []string
	for _, pid := range tftest.Descendants(terraformer) {
		// Read by this process, which may read every process's.
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if errors.Is(err, fs.ErrNotExist) && pid != terraformer {
			continue // a sleep of the gate's shell, ended
		}
		g.Expect(err).NotTo(HaveOccurred())
		command := tftest.Command(pid)
		commands = append(commands, command)
		g.Expect(string(environ)).NotTo(ContainSubstring(token[len(token)-32:]), "the environment of %d (%s)", pid, command)
		g.Expect(string(environ)).NotTo(ContainSubstring(EnvAPIToken), "the environment of %d (%s)", pid, command)
		g.Expect(string(environ)).To(ContainSubstring("TF_VAR_kubeconfig="), "what it was given besides, in %d (%s)", pid, command)
		// Read as terraform and its plugins could.
		for _, file := range []string{"environ", "mem"} {
			out, err := exec.Command(runPodUser[0], append(runPodUser[1:], "head", "-c", "1", fmt.Sprintf("/proc/%d/%s", pid, file))...).CombinedOutput()
			if pid == terraformer {
				g.Expect(err).To(HaveOccurred(), "%s of the terraformer read by a process of its user", file)
				g.Expect(string(out)).To(ContainSubstring("Permission denied"))
			} else if file == "environ" && command != "sleep" {
				g.Expect(err).NotTo(HaveOccurred(), "%s of %d (%s) read by a process of its user: %s", file, pid, command, out)
			}
		}
	}
	g.Expect(commands).To(ContainElements("terraformer", "terraform", HavePrefix("terraform-provi"), "sh"), "a provider plugin, its comm cut to 15 characters")

	gate.Open()
	g.Expect(cmd.Wait()).To(Succeed(), "the run reached the API server with the token")
	f.ExpectEachItemOnceInState(g, 3)
}

// runPodToken is a token of a ServiceAccount that may do anything with the ConfigMaps and
// Secrets of namespace, as a run pod's executor requests one for its run pod.
func runPodToken(t *testing.T, namespace string) string {
	g := NewWithT(t)
	ctx := context.Background()
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "terraformer"}}
	g.Expect(env.Client.Create(ctx, account)).To(Succeed())
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "terraformer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{rbacv1.VerbAll}}},
	}
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "terraformer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: account.Name}},
	}
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	clientset, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}
	token, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, account.Name, request, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return token.Status.Token
}
