package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// DecodeCluster decodes the Cluster's shoot, seed and cloudProfile; each is an empty
// object when absent. It fails with the field error naming one that is not an object.
func DecodeCluster(c *extensionsv1alpha1.Cluster) (map[string]any, *field.Error) {
	cluster := map[string]any{"shoot": map[string]any{}, "seed": map[string]any{}, "cloudProfile": map[string]any{}}
	if c == nil {
		return cluster, nil
	}
	for name, raw := range map[string]*runtime.RawExtension{"shoot": &c.Spec.Shoot, "seed": &c.Spec.Seed, "cloudProfile": &c.Spec.CloudProfile} {
		v, invalid := DecodeObject(field.NewPath("cluster", "spec", name), raw)
		if invalid != nil {
			return nil, invalid
		}
		if v != nil {
			cluster[name] = v
		}
	}
	return cluster, nil
}

// DecodeObject is decodeRaw for the embedded object at path, failing with the field error
// that names it.
func DecodeObject(path *field.Path, raw *runtime.RawExtension) (any, *field.Error) {
	v, err := decodeRaw(raw)
	if err != nil {
		return nil, field.Invalid(path, "", "not a JSON object: "+err.Error())
	}
	return v, nil
}

// decodeRaw decodes an embedded object into maps, slices and json.Number; nil when empty.
func decodeRaw(raw *runtime.RawExtension) (any, error) {
	if raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 || string(bytes.TrimSpace(raw.Raw)) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the object")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("got %T", v)
	}
	return v, nil
}
