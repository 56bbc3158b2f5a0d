package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/api/resource"
)

// cloudProfilePath is where a Cluster carries its CloudProfile: the errors of
// BastionMachine name fields under it.
const cloudProfilePath = "cluster.spec.cloudProfile.spec"

// defaultArchitecture is what Gardener defaults a machine type's and an image version's
// architecture to.
const defaultArchitecture = "amd64"

// BastionMachine picks a bastion's machine type and image from a CloudProfile (decoded
// from a Cluster, see DecodeCluster) as Gardener's extensions pick them: the machine type
// spec.bastion names, else the usable one with the fewest CPUs; the image spec.bastion
// names, else the first with a supported version for the machine's architecture; the
// version it names, else the newest supported one for that architecture. It returns
// machineType, architecture, image and version; it fails with a Rejected naming the
// CloudProfile's field that lacks what it looked for. Machine capabilities (capability
// flavors) are not considered: only the architecture.
func BastionMachine(cloudProfile any, now time.Time) (map[string]any, error) {
	spec := object(object(cloudProfile)["spec"])
	bastion := object(spec["bastion"])
	images := list(spec["machineImages"])
	machine, arch, err := bastionMachineType(spec, bastion, images, now)
	if err != nil {
		return nil, err
	}
	image, version, err := bastionImage(bastion, images, arch, now)
	if err != nil {
		return nil, err
	}
	return map[string]any{"machineType": machine, "architecture": arch, "image": image, "version": version}, nil
}

func bastionMachineType(spec, bastion map[string]any, images []any, now time.Time) (string, string, error) {
	types := list(spec["machineTypes"])
	if name, ok := object(bastion["machineType"])["name"].(string); ok {
		for _, t := range types {
			if object(t)["name"] == name {
				return name, architecture(object(t)["architecture"]), nil
			}
		}
		return "", "", &Rejected{Field: cloudProfilePath + ".bastion.machineType.name", Value: name,
			Detail: "the bastion's machine type is not among the CloudProfile's spec.machineTypes"}
	}
	imageName, _ := object(bastion["machineImage"])["name"].(string)
	supported := imageArchitectures(images, imageName, now)
	var (
		best    string
		bestArc string
		bestCPU *resource.Quantity
	)
	for i, t := range types {
		mt := object(t)
		name, _ := mt["name"].(string)
		arch := architecture(mt["architecture"])
		if name == "" || mt["usable"] == false || (len(supported) > 0 && !supported[arch]) {
			continue
		}
		cpu, err := resource.ParseQuantity(fmt.Sprint(mt["cpu"]))
		if err != nil {
			return "", "", &Rejected{Field: fmt.Sprintf("%s.machineTypes[%d].cpu", cloudProfilePath, i), Value: fmt.Sprint(mt["cpu"]), Detail: "not a quantity: " + err.Error()}
		}
		// Gardener compares whole CPUs, rounded up: of 1500m and 2 it keeps the first.
		if bestCPU == nil || cpu.Value() < bestCPU.Value() {
			best, bestArc, bestCPU = name, arch, &cpu
		}
	}
	if bestCPU == nil {
		return "", "", &Rejected{Field: cloudProfilePath + ".bastion.machineType", Value: nil,
			Detail: "names no machine type, and spec.machineTypes has no usable one of an architecture the bastion's images support"}
	}
	return best, bestArc, nil
}

// imageArchitectures are the architectures of the supported versions of the image named,
// or of every image.
func imageArchitectures(images []any, name string, now time.Time) map[string]bool {
	archs := map[string]bool{}
	for _, img := range images {
		if name != "" && object(img)["name"] != name {
			continue
		}
		for _, v := range list(object(img)["versions"]) {
			if supportedVersion(object(v), now) {
				for _, a := range versionArchitectures(object(v)) {
					archs[a] = true
				}
			}
		}
	}
	return archs
}

func bastionImage(bastion map[string]any, images []any, arch string, now time.Time) (string, string, error) {
	named := object(bastion["machineImage"])
	if name, ok := named["name"].(string); ok {
		i := slices.IndexFunc(images, func(img any) bool { return object(img)["name"] == name })
		if i < 0 {
			return "", "", &Rejected{Field: cloudProfilePath + ".bastion.machineImage.name", Value: name,
				Detail: "the bastion's image is not among the CloudProfile's spec.machineImages"}
		}
		if version, ok := named["version"].(string); ok {
			versions := list(object(images[i])["versions"])
			j := slices.IndexFunc(versions, func(v any) bool { return object(v)["version"] == version })
			if j < 0 || !supportedVersion(object(versions[j]), now) {
				return "", "", &Rejected{Field: cloudProfilePath + ".bastion.machineImage.version", Value: version,
					Detail: fmt.Sprintf("not a supported version of image %s in the CloudProfile's spec.machineImages", name)}
			}
			return name, version, nil
		}
		return newestVersion(images, i, arch, now)
	}
	for i := range images {
		if name, version, err := newestVersion(images, i, arch, now); err == nil {
			return name, version, nil
		}
	}
	return "", "", &Rejected{Field: cloudProfilePath + ".machineImages", Value: nil,
		Detail: fmt.Sprintf("the bastion names no image (spec.bastion.machineImage), and no image has a supported version for architecture %s", arch)}
}

// newestVersion is the newest supported version of images[i] for arch.
func newestVersion(images []any, i int, arch string, now time.Time) (string, string, error) {
	name, _ := object(images[i])["name"].(string)
	var newest *semver.Version
	for _, v := range list(object(images[i])["versions"]) {
		version := object(v)
		if !supportedVersion(version, now) || !slices.Contains(versionArchitectures(version), arch) {
			continue
		}
		parsed, err := semver.NewVersion(fmt.Sprint(version["version"]))
		if err != nil {
			continue
		}
		if newest == nil || parsed.GreaterThan(newest) {
			newest = parsed
		}
	}
	if newest == nil {
		return "", "", &Rejected{Field: fmt.Sprintf("%s.machineImages[%d].versions", cloudProfilePath, i), Value: nil,
			Detail: fmt.Sprintf("image %s has no supported version for architecture %s", name, arch)}
	}
	return name, newest.Original(), nil
}

// supportedVersion says whether a version's current lifecycle stage is "supported", from
// its lifecycle, or else its classification and expiration date.
func supportedVersion(version map[string]any, now time.Time) bool {
	stages := list(version["lifecycle"])
	if len(stages) == 0 {
		if classification, ok := version["classification"].(string); ok && classification != "supported" {
			return false
		}
		expiration, ok := version["expirationDate"].(string)
		return !ok || !startedBy(expiration, now)
	}
	current := "unavailable"
	for _, s := range stages {
		stage := object(s)
		start, _ := stage["startTime"].(string)
		if start == "" || startedBy(start, now) {
			current, _ = stage["classification"].(string)
		}
	}
	return current == "supported"
}

// startedBy says whether an RFC 3339 time is before now; a time that does not parse has
// not started.
func startedBy(rfc3339 string, now time.Time) bool {
	t, err := time.Parse(time.RFC3339, rfc3339)
	return err == nil && t.Before(now)
}

func versionArchitectures(version map[string]any) []string {
	var archs []string
	for _, a := range list(version["architectures"]) {
		if s, ok := a.(string); ok {
			archs = append(archs, s)
		}
	}
	if len(archs) == 0 {
		return []string{defaultArchitecture}
	}
	return archs
}

func architecture(v any) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return defaultArchitecture
}

func object(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}
