package templates

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
)

// embedded holds the providers that ship in the binary: every directory next to this file
// that has a provider.yaml.
//
//go:embed */provider.yaml */schema.json */*.tf.tpl */controlplane */mutations.yaml */_*.tpl */dnsrecord */backupbucket */backupentry */bastion */selfhostedshootexposure
var embedded embed.FS

// Registry holds the known providers by type.
type Registry struct {
	providers map[string]*Provider
}

// UnknownProviderError says no provider serves an Infrastructure type.
type UnknownProviderError struct {
	Type  string
	Known []string
}

func (e *UnknownProviderError) Error() string {
	return fmt.Sprintf("no provider for infrastructure type %q (known: %s)", e.Type, strings.Join(e.Known, ", "))
}

// NewRegistry loads the embedded providers, then each directory in order; a later provider
// of the same type replaces an earlier one. A directory is either one provider (it holds
// provider.yaml) or a parent of provider directories.
func NewRegistry(dirs ...string) (*Registry, error) {
	r := &Registry{providers: map[string]*Provider{}}
	if err := r.addAll(embedded, ".", "embedded"); err != nil {
		return nil, err
	}
	for _, dir := range dirs {
		if err := r.addAll(os.DirFS(dir), ".", dir); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Registry) addAll(fsys fs.FS, dir, source string) error {
	if _, err := fs.Stat(fsys, path.Join(dir, manifestFile)); err == nil {
		return r.add(fsys, dir, source)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return fmt.Errorf("reading providers from %s: %w", source, err)
	}
	found := false
	for _, entry := range entries {
		if !entry.IsDir() {
			continue
		}
		sub := path.Join(dir, entry.Name())
		if _, err := fs.Stat(fsys, path.Join(sub, manifestFile)); err != nil {
			continue
		}
		found = true
		if err := r.add(fsys, sub, path.Join(source, entry.Name())); err != nil {
			return err
		}
	}
	if !found {
		return &ProviderError{Source: source, Err: fmt.Errorf("neither it nor a directory inside it holds a %s", manifestFile)}
	}
	return nil
}

func (r *Registry) add(fsys fs.FS, dir, source string) error {
	p, err := LoadProvider(fsys, dir, source)
	if err != nil {
		return err
	}
	for _, kind := range p.Kinds() {
		k, _ := p.Kind(kind)
		for _, other := range r.providers {
			if other.Manifest.Type == p.Manifest.Type {
				continue
			}
			if theirs, err := other.Kind(kind); err == nil {
				for _, t := range k.Types() {
					if slices.Contains(theirs.Types(), t) {
						return &ProviderError{Source: source, Err: fmt.Errorf("kinds.%s: type %q is served by provider %q (%s) already", kind, t, other.Manifest.Type, other.Source)}
					}
				}
			}
		}
	}
	r.providers[p.Manifest.Type] = p
	return nil
}

// Provider returns the provider serving an Infrastructure type.
func (r *Registry) Provider(infraType string) (*Provider, error) {
	if p, ok := r.providers[infraType]; ok {
		return p, nil
	}
	return nil, &UnknownProviderError{Type: infraType, Known: r.Types()}
}

// Types lists the provider types, sorted.
func (r *Registry) Types() []string {
	return slices.Sorted(maps.Keys(r.providers))
}

// UnknownKindTypeError says no provider serves a kind's spec.type.
type UnknownKindTypeError struct {
	Kind  Kind
	Type  string
	Known []string
}

func (e *UnknownKindTypeError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("no provider serves %s type %q (known: %s)", e.Kind, e.Type, known)
}

// Kind returns the kind directory that serves objects of kind with spec.type specType.
func (r *Registry) Kind(kind Kind, specType string) (*KindProvider, error) {
	for _, providerType := range r.Types() {
		k, err := r.providers[providerType].Kind(kind)
		if err == nil && slices.Contains(k.Types(), specType) {
			return k, nil
		}
	}
	return nil, &UnknownKindTypeError{Kind: kind, Type: specType, Known: r.KindTypes(kind)}
}

// KindTypes lists the spec.type values some provider serves kind for, sorted; none: no
// provider ships a directory for kind, and it is not served.
func (r *Registry) KindTypes(kind Kind) []string {
	var types []string
	for _, p := range r.providers {
		if k, err := p.Kind(kind); err == nil {
			types = append(types, k.Types()...)
		}
	}
	slices.Sort(types)
	return slices.Compact(types)
}
