package tftest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/onsi/gomega"
)

// WriteChainConfig writes a configuration of n pairs of a terraform_data, whose id
// terraform generates when it creates it, and a ConfigMap named after that id, each pair
// depending on the one before, so that terraform creates them interleaved, one at a
// time. A state entry lost by a killed run shows up as a second ConfigMap of the pair
// rather than being adopted again.
//
// Before the pair at each index of gates stands a gate, which the pairs after it wait
// for: a terraform_data whose provisioner marks the gate reached and waits until the
// test opens it. The pair at the gate's index goes on beside it, so that a run stopped
// at a gate may be in the middle of a create, as anywhere in an apply, and yet is sure
// not to have finished.
func (f *Infra) WriteChainConfig(n int, gates ...*Gate) {
	f.T.Helper()
	var b strings.Builder
	b.WriteString("variable \"gates\" {\n  type = string\n}\n\n")
	waitFor := map[int]string{}
	for _, gate := range gates {
		fmt.Fprintf(&b, `resource "terraform_data" "gate_%[1]d" {
  depends_on = [kubectl_manifest.item_%[2]d]
  provisioner "local-exec" {
    command = "touch \"$REACHED\" && until [ -e \"$OPEN\" ]; do sleep 0.05; done"
    environment = {
      REACHED = "${var.gates}/%[1]d.reached"
      OPEN    = "${var.gates}/%[1]d.open"
    }
  }
}

`, gate.Index, gate.Index-1)
		waitFor[gate.Index+1] = fmt.Sprintf(", terraform_data.gate_%d", gate.Index)
	}
	for i := range n {
		dependsOn := ""
		if i > 0 {
			dependsOn = fmt.Sprintf("  depends_on = [kubectl_manifest.item_%d%s]\n", i-1, waitFor[i])
		}
		fmt.Fprintf(&b, `resource "terraform_data" "id_%[1]d" {
%[2]s}

resource "kubectl_manifest" "item_%[1]d" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata = {
      name      = "item-${terraform_data.id_%[1]d.id}"
      namespace = var.namespace
      labels    = { "terraseed-test" = "item" }
    }
  })
}

`, i, dependsOn)
	}
	kubectl := Config(f.T, "kubectl")
	files := map[string]string{"main.tf": b.String(), "provider.tf": kubectl["provider.tf"], "variables.tf": kubectl["variables.tf"]}
	ctx := context.Background()
	gomega.NewWithT(f.T).Expect(f.Objects.WriteConfig(ctx, f.Env.Client, files)).To(gomega.Succeed())
	vars, err := json.Marshal(map[string]any{"namespace": f.Namespace, "resources": n, "gates": f.gates})
	gomega.NewWithT(f.T).Expect(err).NotTo(gomega.HaveOccurred())
	gomega.NewWithT(f.T).Expect(f.Objects.WriteVars(ctx, f.Env.Client, vars)).To(gomega.Succeed())
}

// Gate holds up a chain configuration's apply before the pair at Index.
type Gate struct {
	f     *Infra
	Index int
}

// NewGate makes a gate before the pair at index, where index ConfigMaps exist already.
func (f *Infra) NewGate(index int) *Gate {
	f.T.Helper()
	if f.gates == "" {
		f.gates = f.T.TempDir()
	}
	return &Gate{f: f, Index: index}
}

// WaitUntilReached waits until the gate is reached with everything before it in the
// stored state, and the pair beside it has created its ConfigMap: a kill now lands
// right after a create, as it may anywhere, and before the apply could finish.
func (g *Gate) WaitUntilReached() {
	g.f.T.Helper()
	gomega.NewWithT(g.f.T).Eventually(func(gm gomega.Gomega) {
		_, err := os.Stat(filepath.Join(g.f.gates, fmt.Sprintf("%d.reached", g.Index)))
		gm.Expect(err).NotTo(gomega.HaveOccurred(), "the gate is not reached yet")
		stored, _ := g.f.StateItems(gm)
		gm.Expect(len(stored)).To(gomega.BeNumerically(">=", g.Index))
		gm.Expect(g.f.Items(gm)).To(gomega.HaveLen(g.Index + 1))
	}).WithTimeout(2 * time.Minute).WithPolling(10 * time.Millisecond).Should(gomega.Succeed())
}

// Open lets every run from now on pass the gate.
func (g *Gate) Open() {
	g.f.T.Helper()
	gomega.NewWithT(g.f.T).Expect(os.WriteFile(filepath.Join(g.f.gates, fmt.Sprintf("%d.open", g.Index)), nil, 0o644)).To(gomega.Succeed())
}
