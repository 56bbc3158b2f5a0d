package controlplane

import (
	"fmt"
	"regexp"
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
						return extension.InvalidInput(reasonInvalidConfiguration,
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
	return ImageAllowed(a.AllowedImages, image)
}

// ImageAllowed says whether image starts with one of prefixes (from ParseImagePrefixes).
func ImageAllowed(prefixes []string, image string) bool {
	for _, prefix := range prefixes {
		if prefix != "" && strings.HasPrefix(image, prefix) {
			return true
		}
	}
	return false
}

// imagePrefixCharacters are those of an image reference.
var imagePrefixCharacters = regexp.MustCompile(`^[A-Za-z0-9._/:@-]+$`)

// ParseImagePrefixes parses comma-separated image prefixes (--controlplane-allowed-images),
// each made to end at a boundary of an image reference: a prefix that does not end in
// "/", ":" or "@" stands for itself followed by one of them, so that registry.k8s.io
// admits registry.k8s.io/pause and registry.k8s.io:5000/pause, never
// registry.k8s.io.attacker.example/pause. Empty entries are skipped; an entry that cannot
// start an image reference (a URL scheme, spaces, quotes) is refused.
func ParseImagePrefixes(list string) ([]string, error) {
	var prefixes []string
	for _, prefix := range strings.Split(list, ",") {
		prefix = strings.TrimSpace(prefix)
		switch {
		case prefix == "":
			continue
		case strings.Contains(prefix, "://") || !imagePrefixCharacters.MatchString(prefix):
			return nil, fmt.Errorf("%q is no image prefix: write a registry and repository without a scheme, such as registry.k8s.io/", prefix)
		case strings.HasSuffix(prefix, "/") || strings.HasSuffix(prefix, ":") || strings.HasSuffix(prefix, "@"):
			prefixes = append(prefixes, prefix)
		default:
			prefixes = append(prefixes, prefix+"/", prefix+":", prefix+"@")
		}
	}
	return prefixes, nil
}
