package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// DecodeCluster decodes the Cluster's shoot, seed and cloudProfile; each is an empty
// object when there is no Cluster. A Cluster without a seed (a self-hosted shoot's, which
// gardenadm bootstraps) has no "seed" key, so that a template reading it fails (see
// MissingSeed) instead of rendering without it. It fails with the field error naming a
// part that is not an object.
func DecodeCluster(c *extensionsv1alpha1.Cluster) (map[string]any, *field.Error) {
	cluster := map[string]any{"shoot": map[string]any{}, "seed": map[string]any{}, "cloudProfile": map[string]any{}}
	if c == nil {
		return cluster, nil
	}
	if c.Spec.Seed == nil || isEmpty(c.Spec.Seed) {
		delete(cluster, "seed")
	}
	for name, raw := range map[string]*runtime.RawExtension{"shoot": &c.Spec.Shoot, "seed": c.Spec.Seed, "cloudProfile": &c.Spec.CloudProfile} {
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

// SeedPath is the field a Cluster without a seed lacks.
var SeedPath = field.NewPath("cluster", "spec", "seed")

// MissingSeed is the error of a template that failed reading .cluster.seed of a decoded
// cluster (DecodeCluster) without one: the field error naming it. It is nil for any other
// failure, and when the cluster has a seed.
func MissingSeed(cluster any, err error) *field.Error {
	decoded, ok := cluster.(map[string]any)
	if !ok || err == nil {
		return nil
	}
	if _, hasSeed := decoded["seed"]; hasSeed {
		return nil
	}
	// text/template reports a missing key with this message alone (missingkey=error).
	var exec template.ExecError
	if !errors.As(err, &exec) || !strings.Contains(exec.Error(), `map has no entry for key "seed"`) {
		return nil
	}
	return field.Required(SeedPath, "the Cluster has no seed (a self-hosted shoot, which gardenadm bootstraps), "+
		`and the provider's template reads it; a template serving such shoots reads the seed only under {{ if hasKey .cluster "seed" }} (`+exec.Error()+")")
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

// isEmpty is true for an embedded object that is not there: no bytes, or null.
func isEmpty(raw *runtime.RawExtension) bool {
	return raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 || string(bytes.TrimSpace(raw.Raw)) == "null"
}

// decodeRaw decodes an embedded object into maps, slices and json.Number; nil when empty.
func decodeRaw(raw *runtime.RawExtension) (any, error) {
	if isEmpty(raw) {
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
