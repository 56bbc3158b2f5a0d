package webhook

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/terraseed/terraseed/templates/mutations"
)

// Mutate applies a rendered mutation to a pod template. It is idempotent: the result of
// a second call equals the first's, so a Deployment Gardener writes again is stored as
// it was. Containers the pod does not have are skipped.
func Mutate(pod *corev1.PodSpec, m *mutations.Deployment) {
	for _, name := range slices.Sorted(maps.Keys(m.Containers)) {
		i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
		if i < 0 {
			continue
		}
		c, cm := &pod.Containers[i], m.Containers[name]
		for _, flag := range cm.Flags {
			ensureFlag(c, flag)
		}
		for _, flag := range cm.ListFlags {
			ensureListFlag(c, flag)
		}
		for _, env := range cm.Env {
			c.Env = ensureNamed(c.Env, env, func(e corev1.EnvVar) string { return e.Name })
		}
		for _, mount := range cm.VolumeMounts {
			c.VolumeMounts = ensureNamed(c.VolumeMounts, mount, func(m corev1.VolumeMount) string { return m.Name })
		}
	}
	for _, volume := range m.Volumes {
		pod.Volumes = ensureNamed(pod.Volumes, volume, func(v corev1.Volume) string { return v.Name })
	}
}

// isFlag says whether item sets the flag name (`--name` or `--name=...`).
func isFlag(item, name string) bool {
	return item == name || strings.HasPrefix(item, name+"=")
}

// ensureFlag replaces every occurrence of the flag in command and args, or appends it
// where the container keeps its flags: to args when it has any, else to command.
func ensureFlag(c *corev1.Container, flag string) {
	name, _, _ := strings.Cut(flag, "=")
	found := false
	for _, items := range [][]string{c.Command, c.Args} {
		for i := range items {
			if isFlag(items[i], name) {
				items[i], found = flag, true
			}
		}
	}
	if !found {
		appendFlag(c, flag)
	}
}

// ensureListFlag adds each value of `--name=a,b` once to every `--name=...` list, or
// appends the flag when the container has none.
func ensureListFlag(c *corev1.Container, flag string) {
	name, value, _ := strings.Cut(flag, "=")
	found := false
	for _, items := range [][]string{c.Command, c.Args} {
		for i := range items {
			if !isFlag(items[i], name) {
				continue
			}
			found = true
			_, current, _ := strings.Cut(items[i], "=")
			var list []string
			if current != "" {
				list = strings.Split(current, ",")
			}
			for _, v := range strings.Split(value, ",") {
				if !slices.Contains(list, v) {
					list = append(list, v)
				}
			}
			items[i] = name + "=" + strings.Join(list, ",")
		}
	}
	if !found {
		appendFlag(c, flag)
	}
}

func appendFlag(c *corev1.Container, flag string) {
	if len(c.Args) > 0 {
		c.Args = append(c.Args, flag)
	} else {
		c.Command = append(c.Command, flag)
	}
}

// ensureNamed replaces the item of the same name, or appends it.
func ensureNamed[T any](items []T, item T, name func(T) string) []T {
	for i := range items {
		if name(items[i]) == name(item) {
			items[i] = item
			return items
		}
	}
	return append(items, item)
}
