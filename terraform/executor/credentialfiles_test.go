package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// A local run reads a credential file, such as a workload identity's token, from the run's
// temporary directory, and the file follows its Secret while the run goes on: the apply
// here reads the first token, then waits until the file holds the one the test writes
// into the Secret during the run. The file is gone with the run.
func TestALocalRunsCredentialFileFollowsItsSecretDuringTheRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 0)
	f.executor.CredentialRefresh = 100 * time.Millisecond
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: "cloudprovider"},
		Data:       map[string][]byte{"token": []byte("first-token")},
	}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	marks := t.TempDir()
	files := map[string]string{"main.tf": `variable "marks" {
  type = string
}

# Notes the token file's path and first content, then waits for the renewed token.
resource "terraform_data" "reader" {
  provisioner "local-exec" {
    command = "echo \"$TOKEN_FILE\" > \"$MARKS/path\" && cp \"$TOKEN_FILE\" \"$MARKS/first\" && i=0 && until grep -qx renewed-token \"$TOKEN_FILE\"; do i=$((i+1)); [ $i -lt 600 ] || exit 1; sleep 0.05; done"
    environment = {
      MARKS = var.marks
    }
  }
}
`}
	g.Expect(f.Objects.WriteConfig(ctx, env.Client, files)).To(Succeed())
	vars, err := json.Marshal(map[string]any{"marks": marks})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Objects.WriteVars(ctx, env.Client, vars)).To(Succeed())

	req := run.Request{ID: f.Objects.ID, Command: run.Apply, Files: map[string]corev1.SecretKeySelector{
		"TOKEN_FILE": {LocalObjectReference: corev1.LocalObjectReference{Name: "cloudprovider"}, Key: "token"},
	}}
	done := make(chan error, 1)
	go func() {
		_, err := f.executor.Run(ctx, req)
		done <- err
	}()
	g.Eventually(func(g Gomega) {
		g.Expect(os.ReadFile(filepath.Join(marks, "first"))).To(Equal([]byte("first-token")))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	secret.Data["token"] = []byte("renewed-token\n")
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()), "the apply saw the renewed token in its file")

	path, err := os.ReadFile(filepath.Join(marks, "path"))
	g.Expect(err).NotTo(HaveOccurred())
	tmp := filepath.Dir(filepath.Dir(filepath.Dir(strings.TrimSpace(string(path)))))
	g.Expect(filepath.Base(tmp)).To(HavePrefix("terraseed-run-"), "in the run's temporary directory")
	g.Expect(tmp).NotTo(BeADirectory(), "gone with the run")
	g.Expect(f.Output.String()).NotTo(ContainSubstring("first-token"))
}

// A run pod mounts each credential file from its Secret whole, which the kubelet keeps
// fresh, and gets its path in the environment, never its content.
func TestARunPodMountsItsCredentialFilesFromTheirSecrets(t *testing.T) {
	g := NewWithT(t)
	e := &PodExecutor{Image: "terraformer"}
	req := run.Request{ID: run.ID{Namespace: "shoot--a--b", Name: "infra", Purpose: run.PurposeInfra}, Command: run.Apply,
		Env:   map[string]string{"TF_VAR_role_arn": "arn:aws:iam::1:role/r"},
		Files: map[string]corev1.SecretKeySelector{"TF_VAR_web_identity_token_file": {LocalObjectReference: corev1.LocalObjectReference{Name: "cloudprovider"}, Key: "token"}}}
	g.Expect(req.Validate()).To(Succeed())
	pod := e.podFor(req, req.ID.Labels(), nil, false)
	container := pod.Spec.Containers[0]
	g.Expect(container.Env).To(ConsistOf(corev1.EnvVar{Name: "TF_VAR_web_identity_token_file", Value: "/credentials/0/token"}, HaveField("Name", terraformer.EnvPodUID)))
	g.Expect(container.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "credentials-0", MountPath: "/credentials/0", ReadOnly: true}))
	for _, m := range container.VolumeMounts {
		g.Expect(m.SubPath).To(BeEmpty(), "a subPath mount is never refreshed")
	}
	var volume *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == "credentials-0" {
			volume = &pod.Spec.Volumes[i]
		}
	}
	g.Expect(volume).NotTo(BeNil())
	g.Expect(volume.Secret.SecretName).To(Equal("cloudprovider"))
	g.Expect(volume.Secret.Items).To(Equal([]corev1.KeyToPath{{Key: "token", Path: "token"}}), "the token alone, not the config")

	req.Files["TF_VAR_role_arn"] = req.Files["TF_VAR_web_identity_token_file"]
	g.Expect(req.Validate()).To(MatchError(ContainSubstring(`files["TF_VAR_role_arn"]: is set in env too`)))
}
