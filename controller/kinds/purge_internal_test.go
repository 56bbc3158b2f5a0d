package kinds

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/terraseed/terraseed/api/scheme"
	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/purge"
)

// TestPurgeJoinsAKeptConfigurationAnEarlierVersionApplied: the deletion of an aws
// BackupEntry whose configuration was last applied without the purge (by an earlier
// version) gives the kept configuration the purge before its destroy, and changes
// nothing else of it; a source entry's kept configuration loses a purge it carries.
func TestPurgeJoinsAKeptConfigurationAnEarlierVersionApplied(t *testing.T) {
	providers, err := templates.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"shoot--dev--prod--1b2c3d4e": true, "source-shoot--dev--prod--1b2c3d4e": false} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			entry := &extensionsv1alpha1.BackupEntry{
				ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-1"},
				Spec: extensionsv1alpha1.BackupEntrySpec{
					DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws"}, Region: "eu-west-1", BucketName: "backups",
					SecretRef: corev1.SecretReference{Name: "backup", Namespace: "garden"},
				},
			}
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "backup"},
				Data: map[string][]byte{"accessKeyID": []byte("AKIATEST"), "secretAccessKey": []byte("secret")}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
			a := &Actuator{Client: c, APIReader: c, Providers: providers, Runs: newFakeRuns(), Namespace: "terraseed"}
			op := a.operation(request{Object: entry, kind: backupEntryKind})
			kept := map[string]string{"main.tf": "# applied by an earlier version\n"}
			if !want {
				kept[purge.Key] = `{"kind":"s3"}`
			}
			objects := op.objects()
			g.Expect(objects.WriteConfig(ctx, c, kept)).To(Succeed())

			g.Expect(op.ensureConfig(ctx, &deleteScope{})).To(Succeed())

			cm := &corev1.ConfigMap{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.ConfigName()}, cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue("main.tf", kept["main.tf"]), "the configuration that made the state stays")
			if !want {
				g.Expect(cm.Data).NotTo(HaveKey(purge.Key), "a source entry's deletion leaves the shoot's backups")
				return
			}
			g.Expect(cm.Data).To(HaveKey(purge.Key))
			spec, err := purge.Parse([]byte(cm.Data[purge.Key]))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(spec.Prefix).To(Equal(name + "/"))
			g.Expect(cm.Data[purge.Key]).NotTo(ContainSubstring("AKIATEST"))
		})
	}
}
