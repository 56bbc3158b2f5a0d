package kinds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/purge"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// An aws BackupEntry's configuration carries the purge of its prefix, which its destroy
// runs first; a source entry's carries none. (The apply itself fails here: the aws
// provider is not in the test's provider mirror. The configuration is written before.)
func TestPurgeOfAnAWSBackupEntryIsInItsConfiguration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllerNS := env.Namespace(t)
	garden := env.Namespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: garden, Name: "backup"},
		Data:       map[string][]byte{"accessKeyID": []byte("AKIATEST"), "secretAccessKey": []byte("secret")},
	})).To(Succeed())
	startControllerWith(t, controllerNS, workDir(t), env.Config, 2, servingKinds(controllerNS), func(s *controllerSetup) { s.moreTypes = []string{"aws"} })

	configOf := func(name string) func(g Gomega) map[string]string {
		return func(g Gomega) map[string]string {
			objects := state.RunObjects{ID: run.ID{Namespace: controllerNS, Name: name, Purpose: purge.Purpose}}
			cm := &corev1.ConfigMap{}
			g.Expect(env.Client.Get(ctx, keyOf(controllerNS, objects.ConfigName()), cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKey("main.tf"))
			return cm.Data
		}
	}
	for _, name := range []string{"shoot--" + controllerNS + "--prod--1b2c3d4e", "source-shoot--" + controllerNS + "--prod--1b2c3d4e"} {
		entry := &extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws"}, Region: "eu-west-1", BucketName: "backups-" + controllerNS,
				SecretRef: corev1.SecretReference{Name: "backup", Namespace: garden},
			},
		}
		g.Expect(env.Client.Create(ctx, entry)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), entry) })
	}

	g.Eventually(configOf("shoot--"+controllerNS+"--prod--1b2c3d4e")).WithTimeout(2*time.Minute).Should(HaveKey(purge.Key), "the entry's configuration")
	data := configOf("shoot--" + controllerNS + "--prod--1b2c3d4e")(g)
	spec, err := purge.Parse([]byte(data[purge.Key]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*spec).To(Equal(purge.Spec{Kind: purge.KindS3, Bucket: "backups-" + controllerNS, Prefix: "shoot--" + controllerNS + "--prod--1b2c3d4e/", Region: "eu-west-1",
		Env: purge.Env{AccessKeyID: "AWS_ACCESS_KEY_ID", SecretAccessKey: "AWS_SECRET_ACCESS_KEY", Endpoint: "TF_VAR_endpoint"}}))
	g.Expect(data[purge.Key]).NotTo(ContainSubstring("AKIATEST"), "names of variables, never credentials")

	g.Eventually(configOf("source-shoot--" + controllerNS + "--prod--1b2c3d4e")).WithTimeout(2 * time.Minute).ShouldNot(BeEmpty())
	g.Expect(configOf("source-shoot--"+controllerNS+"--prod--1b2c3d4e")(g)).NotTo(HaveKey(purge.Key), "a source entry's deletion leaves the shoot's backups")
}
