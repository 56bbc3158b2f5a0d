package report

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
)

// The report's format is that of earlier versions, whose run pods may still write it
// during an upgrade: one annotation per part, each the JSON of its part.
func TestAReportKeepsItsFormat(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "report.json")
	file := File(path)
	progress := &run.Progress{Command: "apply", Phase: "applying", Done: 1, Total: 2, Current: "creating a.b"}
	g.Expect(file.Write(ctx, Report{Progress: progress})).To(Succeed())
	plan := &plan.Summary{Changes: []plan.Change{{Address: "a.b", Type: "a", Action: "create"}}, Digest: "sha256:0123456789abcdef"}
	g.Expect(file.Write(ctx, Report{Plan: plan})).To(Succeed())

	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(`{"terraseed.gardener.cloud/plan":"{\"changes\":[{\"address\":\"a.b\",\"type\":\"a\",\"action\":\"create\"}],\"digest\":\"sha256:0123456789abcdef\"}",` +
		`"terraseed.gardener.cloud/progress":"{\"command\":\"apply\",\"phase\":\"applying\",\"done\":1,\"total\":2,\"current\":\"creating a.b\"}"}`))
	read, err := file.Read(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read).To(Equal(Report{Progress: progress, Plan: plan}))

	g.Expect(reportOf(map[string]string{AnnotationProgress: "not json"})).To(Equal(Report{}), "an unreadable part is none")
	g.Expect(file.Clear(ctx)).To(Succeed())
	read, err = file.Read(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read).To(Equal(Report{}))
}
