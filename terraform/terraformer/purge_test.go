package terraformer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/internal/s3test"
	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/purge"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/test/testenv"
)

// awsEntryPurge is the purge the aws provider declares for the BackupEntry named name of
// bucket, as its configuration carries it.
func awsEntryPurge(t *testing.T, name, bucket string) string {
	t.Helper()
	g := NewWithT(t)
	r, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	k, err := r.Kind(templates.KindBackupEntry, "aws")
	g.Expect(err).NotTo(HaveOccurred())
	out, err := k.Render(templates.KindInput{Object: &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws"},
			Region:      s3test.Region, BucketName: bucket,
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: "garden"},
		},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Purge).NotTo(BeEmpty())
	return out.Purge
}

// writePurgeConfig makes f's run objects those of purpose, with the kubectl test
// configuration of one ConfigMap and the purge the configuration carries.
func (f *fixture) writePurgeConfig(t *testing.T, purpose run.Purpose, spec string) {
	t.Helper()
	g := NewWithT(t)
	f.Objects.ID.Purpose = purpose
	files := tftest.Config(t, "kubectl")
	files[purge.Key] = spec
	g.Expect(f.Objects.WriteConfig(context.Background(), env.Client, files)).To(Succeed())
	vars, err := json.Marshal(map[string]any{"namespace": f.Namespace, "resources": 1})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Objects.WriteVars(context.Background(), env.Client, vars)).To(Succeed())
}

// A BackupEntry's destroy purges the entry's prefix, as the aws provider declares it,
// before terraform destroys: a purge that fails leaves what terraform made, and the
// destroy run again purges and destroys. An apply never purges. The terraform
// configuration is the test's (the aws provider is not in the provider mirror here); the
// purge is the aws provider's, against an S3 API server.
func TestPurgeRunsBeforeTheDestroyOfABackupEntry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := s3test.New(t, "backups")
	entry := "shoot--dev--prod--1b2c3d4e"
	for i := range 30 {
		g.Expect(s.Write(ctx, fmt.Sprintf("%s/v2/full-%02d", entry, i), 2, i%3 == 0)).To(Succeed())
	}
	// Another entry whose name starts with this one's.
	g.Expect(s.Write(ctx, entry+"0/v2/full-00", 2, true)).To(Succeed())
	g.Expect(s.Write(ctx, entry, 1, false)).To(Succeed())
	before, _ := s.Versions(g)
	inside, outside := s3test.Split(before, entry+"/")
	g.Expect(inside).To(HaveLen(30*2 + 10))

	f := newFixture(t, 1)
	f.writePurgeConfig(t, purge.Purpose, awsEntryPurge(t, entry, s.Bucket))
	credentials := []string{"AWS_ACCESS_KEY_ID=" + s3test.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + s3test.SecretAccessKey, "TF_VAR_endpoint=" + s.URL}

	apply := f.runner(run.Apply)
	apply.Env = append(apply.Env, credentials...)
	_, err := f.runWith(ctx, apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Items(g)).To(HaveLen(1))
	after, _ := s.Versions(g)
	g.Expect(after).To(Equal(before), "an apply purges nothing")

	// Without the secret key the purge fails, and the destroy does not start.
	destroy := f.runner(run.Destroy)
	destroy.Env = append(destroy.Env, credentials[0], credentials[2])
	_, err = f.runWith(ctx, destroy)
	g.Expect(err).To(MatchError(ContainSubstring("before terraform destroy: " + purge.ErrNoCredentials.Error())))
	g.Expect(destroy.Phases()).To(HaveKey("purge"))
	g.Expect(destroy.Phases()).NotTo(HaveKey(string(run.Destroy)))
	g.Expect(f.Items(g)).To(HaveLen(1), "a failed purge fails the deletion before terraform destroys")
	after, _ = s.Versions(g)
	g.Expect(after).To(Equal(before))

	destroy = f.runner(run.Destroy)
	destroy.Env = append(destroy.Env, credentials...)
	result, err := f.runWith(ctx, destroy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Phases).To(HaveKey("purge"))
	g.Expect(result.Phases).To(HaveKey(string(run.Destroy)))
	t.Logf("purged %d versions and delete markers in %s, then destroyed in %s", len(inside), result.Phases["purge"], result.Phases[string(run.Destroy)])
	g.Expect(f.Items(g)).To(BeEmpty())
	after, _ = s.Versions(g)
	g.Expect(after).To(Equal(outside), "every version under the entry's prefix is gone, every other one kept")
}

// Only a BackupEntry's run purges: the configuration of another kind's run that carries
// a purge is refused before anything runs, and nothing is deleted.
func TestPurgeOfAnotherKindsRunIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := s3test.New(t, "backups")
	entry := "shoot--dev--prod--1b2c3d4e"
	g.Expect(s.Write(ctx, entry+"/v2/full-00", 2, false)).To(Succeed())
	before, _ := s.Versions(g)

	f := newFixture(t, 1)
	f.writePurgeConfig(t, run.PurposeInfra, awsEntryPurge(t, entry, s.Bucket))
	destroy := f.runner(run.Destroy)
	destroy.Env = append(destroy.Env, "AWS_ACCESS_KEY_ID="+s3test.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+s3test.SecretAccessKey, "TF_VAR_endpoint="+s.URL)
	_, err := f.runWith(ctx, destroy)
	g.Expect(err).To(MatchError(ContainSubstring("only the runs of a backupentry purge")))
	var runErr *run.Error
	g.Expect(errors.As(err, &runErr)).To(BeTrue())
	g.Expect(runErr.Invalid).To(BeTrue(), "a purge in another kind's configuration never works")
	after, _ := s.Versions(g)
	g.Expect(after).To(Equal(before))
}

// A run pod's terraformer, whose credentials are its process's environment, purges with
// them before its destroy.
func TestPurgeInARunPodsTerraformerUsesItsEnvironment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := s3test.New(t, "backups")
	entry := "shoot--dev--prod--1b2c3d4e"
	g.Expect(s.Write(ctx, entry+"/v2/full-00", 2, true)).To(Succeed())
	g.Expect(s.Write(ctx, entry+"-2/v2/full-00", 1, false)).To(Succeed())
	before, _ := s.Versions(g)
	_, outside := s3test.Split(before, entry+"/")

	f := newFixture(t, 1)
	f.writePurgeConfig(t, purge.Purpose, awsEntryPurge(t, entry, s.Bucket))
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	for name, value := range map[string]string{
		"TF_VAR_kubeconfig": f.Kubeconfig, "HOME": f.home, "TMPDIR": f.tmp,
		"AWS_ACCESS_KEY_ID": s3test.AccessKeyID, "AWS_SECRET_ACCESS_KEY": s3test.SecretAccessKey, "TF_VAR_endpoint": s.URL,
	} {
		t.Setenv(name, value)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, []byte(f.Kubeconfig), 0o600)).To(Succeed())
	var stdout, stderr testenv.SyncBuffer
	code := Main(ctx, []string{"destroy",
		"--namespace", f.Namespace, "--name", f.Objects.ID.Name, "--purpose", string(purge.Purpose),
		"--kubeconfig", kubeconfig, "--work-dir", f.workDir,
		"--terraform", f.settings.Terraform, "--plugin-mirror", f.settings.Plugins.Mirror,
		"--report-file", f.reportFile, "--termination-message-path", filepath.Join(t.TempDir(), "termination-log"),
	}, &stdout, &stderr)
	g.Expect(code).To(Equal(0), "stderr:\n%s", stderr.String())
	g.Expect(stderr.String()).To(ContainSubstring(`"msg":"purged"`))
	g.Expect(stderr.String()).NotTo(ContainSubstring(s3test.SecretAccessKey))
	g.Expect(f.Items(g)).To(BeEmpty())
	after, _ := s.Versions(g)
	g.Expect(after).To(Equal(outside))
}
