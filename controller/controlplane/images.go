package controlplane

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/terraseed/terraseed/controller/extension"
)

// podSpecPaths are where the kinds a control plane renders hold a pod spec.
var podSpecPaths = [][]string{
	{"spec"},                     // Pod
	{"spec", "template", "spec"}, // Deployment, StatefulSet, DaemonSet, ReplicaSet, Job
	{"spec", "jobTemplate", "spec", "template", "spec"}, // CronJob
}

// checkImages refuses, before anything is applied, a container image outside the
// prefixes the operator allows: a control plane runs in the seed with the shoot's
// credentials mounted, and some providers (local) let the shoot's owner choose the image.
// With no prefixes configured every image is allowed.
func (a *Actuator) checkImages(objects []*unstructured.Unstructured) error {
	if len(a.AllowedImages) == 0 {
		return nil
	}
	for _, obj := range objects {
		for _, path := range podSpecPaths {
			spec, found, _ := unstructured.NestedMap(obj.Object, path...)
			if !found {
				continue
			}
			for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
				containers, _, _ := unstructured.NestedSlice(spec, list)
				for _, c := range containers {
					container, _ := c.(map[string]any)
					image, _ := container["image"].(string)
					if !a.imageAllowed(image) {
						return extension.InvalidInput(ReasonInvalidConfiguration,
							"%s %s: container %v: image %q is not under a prefix the operator allows (%s)",
							obj.GetKind(), obj.GetName(), container["name"], image, strings.Join(a.AllowedImages, ", "))
					}
				}
			}
		}
	}
	return nil
}

func (a *Actuator) imageAllowed(image string) bool {
	for _, prefix := range a.AllowedImages {
		if prefix != "" && strings.HasPrefix(image, prefix) {
			return true
		}
	}
	return false
}
