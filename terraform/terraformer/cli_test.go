package terraformer

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// An unknown --state-storage stops the run before it reads anything, naming the flag.
func TestAnUnknownStateStorageIsRefused(t *testing.T) {
	g := NewWithT(t)
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"apply", "--namespace", "ns", "--name", "infra", "--state-storage", "etcd",
		"--termination-message-path", filepath.Join(t.TempDir(), "termination-log")}, &stdout, &stderr)
	g.Expect(code).To(Equal(1))
	g.Expect(stderr.String()).To(ContainSubstring(`--state-storage: "etcd" is neither configmap nor secret`))
}
