package testenv

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// LocalProviderConfig is a providerConfig of the local provider with one zone per
// workers CIDR, named zone-a, zone-b, ...
func LocalProviderConfig(workers ...string) *runtime.RawExtension {
	var zones []any
	for i, cidr := range workers {
		zones = append(zones, map[string]any{"name": fmt.Sprintf("zone-%c", 'a'+i), "workers": cidr})
	}
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "InfrastructureConfig",
		"networks": map[string]any{"cidr": "10.250.0.0/16", "zones": zones},
	})
	if err != nil {
		panic(err)
	}
	return &runtime.RawExtension{Raw: raw}
}

// StateItems reads what a state of the tests' item configurations holds: the names of
// the ConfigMaps its kubectl_manifest instances created, and the ids of its
// terraform_data "id" instances (not the gates a chain configuration waits at), each
// sorted. An empty state holds nothing.
func StateItems(state []byte) (names, ids []string, err error) {
	if len(strings.TrimSpace(string(state))) == 0 {
		return nil, nil, nil
	}
	var file struct {
		Resources []struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Instances []struct {
				Attributes map[string]any `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(state, &file); err != nil {
		return nil, nil, err
	}
	for _, r := range file.Resources {
		for _, inst := range r.Instances {
			switch {
			case r.Type == "kubectl_manifest":
				names = append(names, fmt.Sprint(inst.Attributes["name"]))
			case r.Type == "terraform_data" && (r.Name == "id" || strings.HasPrefix(r.Name, "id_")):
				ids = append(ids, fmt.Sprint(inst.Attributes["id"]))
			}
		}
	}
	sort.Strings(names)
	sort.Strings(ids)
	return names, ids, nil
}
