package terraformer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/imports"
)

// A recovery imports every resource a lost state's index names, and one of them may be
// gone since (a run destroyed it and the controller never read its end). terraform then
// fails the plan without naming the address: the resource is created again only when
// the failure can be pinned on the recovered imports, each error saying its object does
// not exist and as many errors as imports that planned nothing. A transient error, an
// adopted resource that is gone or an import skipped for another's failure leaves the
// plan failed, and nothing is created.

// nonExistentImport is terraform's and OpenTofu's error for a provider that found no
// object under an import ID.
const nonExistentImport = "Cannot import non-existent remote object"

// kubernetesNotFound ends the error of a provider whose import asked the Kubernetes API
// for an object that is not there (e.g. `configmaps "x" not found`).
var kubernetesNotFound = regexp.MustCompile(`(^|: )[a-z0-9.-]+ "[^"]+" not found$`)

// goneImport says whether a diagnostic says that an imported object does not exist.
func goneImport(summary, detail string) bool {
	return summary == nonExistentImport || kubernetesNotFound.MatchString(strings.TrimSpace(summary)) && detail == ""
}

// dropGoneImports removes from the recovered imports those a failed plan found gone, as
// the comment above says, and says whether it removed any: the plan is then made again.
func (r *Runner) dropGoneImports(ctx context.Context) (bool, error) {
	importing, gone, other := r.tracker.importOutcome()
	if gone == 0 || other > 0 {
		return false, nil
	}
	adopted, _, err := importFile(filepath.Join(r.WorkDir, imports.File))
	if err != nil {
		return false, err
	}
	recovered, file, err := importFile(filepath.Join(r.WorkDir, imports.RecoveredFile))
	if err != nil || file == nil {
		return false, err
	}
	missing := func(blocks map[string]*hclwrite.Block) []string {
		var addresses []string
		for address := range blocks {
			if !slices.Contains(importing, address) {
				addresses = append(addresses, address)
			}
		}
		slices.Sort(addresses)
		return addresses
	}
	dropped := missing(recovered)
	if len(missing(adopted)) > 0 || len(dropped) != gone {
		return false, nil
	}
	for _, address := range dropped {
		file.Body().RemoveBlock(recovered[address])
	}
	if err := os.WriteFile(filepath.Join(r.WorkDir, imports.RecoveredFile), file.Bytes(), 0o600); err != nil {
		return false, fmt.Errorf("writing %s: %w", imports.RecoveredFile, err)
	}
	logf.FromContext(ctx).Info("recoveredResourcesGone", "addresses", dropped)
	return true, nil
}

// importFile reads the import blocks of a file of the working directory, by the address
// they import to; none when there is no such file.
func importFile(path string) (map[string]*hclwrite.Block, *hclwrite.File, error) {
	content, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	file, diags := hclwrite.ParseConfig(content, filepath.Base(path), hcl.InitialPos)
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("reading %s: %w", filepath.Base(path), diags)
	}
	blocks := map[string]*hclwrite.Block{}
	for _, block := range file.Body().Blocks() {
		if to := block.Body().GetAttribute("to"); block.Type() == "import" && to != nil {
			blocks[strings.TrimSpace(string(to.Expr().BuildTokens(nil).Bytes()))] = block
		}
	}
	return blocks, file, nil
}
