package infrastructure

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/run"
)

// AnnotationImport adopts existing infrastructure into an Infrastructure: a JSON object
// of resource addresses to the IDs `terraform import` takes for them. The next apply
// imports them instead of creating them; the annotation is removed once it succeeded.
const AnnotationImport = run.LabelPrefix + "import"

// adoptions are the imports the Infrastructure's annotation asks for, checked: an address
// must be a plain resource instance address and an ID must not be empty.
func (op *operation) adoptions() (map[string]string, error) {
	raw, ok := op.infra.Annotations[AnnotationImport]
	if !ok {
		return nil, nil
	}
	field := fmt.Sprintf("metadata.annotations[%s]", AnnotationImport)
	var imports map[string]string
	if err := json.Unmarshal([]byte(raw), &imports); err != nil {
		return nil, extension.InvalidInput(ReasonInvalidConfiguration, "%s: must be a JSON object of resource addresses to import IDs: %w", field, err)
	}
	for _, address := range slices.Sorted(maps.Keys(imports)) {
		switch {
		case !instanceAddress.MatchString(address):
			return nil, extension.InvalidInput(ReasonInvalidConfiguration, "%s: %q is not a resource instance address such as aws_vpc.vpc or aws_subnet.nodes[\"a\"]", field, address)
		case imports[address] == "":
			return nil, extension.InvalidInput(ReasonInvalidConfiguration, "%s: the import ID of %s is empty", field, address)
		}
	}
	return imports, nil
}

// adopted removes the import annotation once the apply that imported it succeeded.
func (op *operation) adopted(ctx context.Context) error {
	if _, ok := op.infra.Annotations[AnnotationImport]; !ok {
		return nil
	}
	return op.req.RemoveAnnotation(ctx, AnnotationImport)
}
