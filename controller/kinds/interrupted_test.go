package kinds_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/test/testenv"
)

// steppedShoot is a shoot of the test provider "stepped": a resource block per step, each
// create sleeping as configured.
func steppedShoot(t *testing.T, steps, seconds int) *shoot {
	t.Helper()
	s := newShoot(t)
	s.infra.Spec.Type = "stepped"
	s.infra.Spec.ProviderConfig = steppedConfig(steps, seconds)
	NewWithT(t).Expect(env.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "cloudprovider"},
		Data:       map[string][]byte{"token": []byte("secret-token")},
	})).To(Succeed())
	return s
}

func steppedConfig(steps, seconds int) *runtime.RawExtension {
	raw, _ := json.Marshal(map[string]int{"steps": steps, "seconds": seconds})
	return &runtime.RawExtension{Raw: raw}
}

// killTerraformIn SIGKILLs every terraform process working in dir, as a crash would: it
// records nothing of the creates under way.
func killTerraformIn(g Gomega, terraformPath, dir string) {
	procs, err := procfs.AllProcs()
	g.Expect(err).NotTo(HaveOccurred())
	killed := 0
	for _, p := range procs {
		if !isTerraform(p, terraformPath) {
			continue
		}
		if cwd, err := p.Cwd(); err == nil && strings.HasPrefix(cwd, dir) && syscall.Kill(p.PID, syscall.SIGKILL) == nil {
			killed++
		}
	}
	g.Expect(killed).To(BeNumerically(">", 0), "a terraform process in %s", dir)
}

func interruptedOf(g Gomega, infra *extensionsv1alpha1.Infrastructure) []string {
	g.Expect(infra.Status.State).NotTo(BeNil())
	var kept struct{ Interrupted []string }
	g.Expect(json.Unmarshal(infra.Status.State.Raw, &kept)).To(Succeed())
	return kept.Interrupted
}

// terraform killed while it created resources records none of them, though the provider
// may have made them. The run reported the creates under way, and the controller keeps
// them, also where the spec changed before the failed run was read: the next apply, whose
// configuration no longer declares one of them, stops and names it rather than leave it
// behind; once it is confirmed removed, the apply goes on.
func TestACreateInterruptedByAKillIsNeverLeftBehindUnnamed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := steppedShoot(t, 2, 60)
	dir := workDir(t)
	startController(t, s.namespace, dir)
	// What the operator confirmed earlier, for another refusal: the value asked for now
	// keeps it, or confirming this refusal would bring that one back.
	metav1.SetMetaDataAnnotation(&s.infra.ObjectMeta, kinds.AnnotationLostRemoved, "terraform_data.other")
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	g.Eventually(func(g Gomega) {
		last := s.get(g).Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Description).To(And(ContainSubstring("creating terraform_data.step_"), ContainSubstring("applying 0/2")))
	}).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	// Both creates are under way, each sleeping in its provisioner.
	time.Sleep(time.Second)
	killTerraformIn(g, testenv.Terraform(t), dir)

	// At once one step fewer, before the failed run is read: step_1 is no longer declared.
	s.update(t, func(infra *extensionsv1alpha1.Infrastructure) { infra.Spec.ProviderConfig = steppedConfig(1, 0) })
	g.Eventually(func(g Gomega) {
		infra := s.get(g)
		g.Expect(infra.Status.LastError).NotTo(BeNil())
		g.Expect(infra.Status.LastError.Description).To(And(
			ContainSubstring("a run ended while terraform created 1 resources that no state holds and this run would not find again: terraform_data.step_1."),
			ContainSubstring(kinds.AnnotationLostRemoved+`="terraform_data.other,terraform_data.step_1"`),
		))
		g.Expect(interruptedOf(g, infra)).To(ConsistOf("terraform_data.step_0", "terraform_data.step_1"))
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	s.update(t, func(infra *extensionsv1alpha1.Infrastructure) {
		metav1.SetMetaDataAnnotation(&infra.ObjectMeta, kinds.AnnotationLostRemoved, "terraform_data.other,terraform_data.step_1")
	})
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(interruptedOf(g, infra)).To(BeEmpty(), "a successful apply ends what it kept")
	g.Eventually(func(g Gomega) {
		g.Expect(s.get(g).Annotations).NotTo(HaveKey(kinds.AnnotationLostRemoved))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
