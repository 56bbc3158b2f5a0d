package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Change is one planned change of a resource.
type Change struct {
	Address string `json:"address"`
	Type    string `json:"type"`
	// Action is terraform's: create, update, delete, replace, move, import, read, noop.
	Action string `json:"action"`
	// Importing says the resource is imported before the action (an import alone is
	// the action import).
	Importing bool `json:"importing,omitempty"`
}

// Summary is what a plan found: the changes it would make, and the resources changed
// outside terraform since the last run.
type Summary struct {
	Changes []Change `json:"changes,omitempty"`
	Drift   []Change `json:"drift,omitempty"`
	// Digest identifies the plan (Digest): the allow-destroy annotation names it.
	Digest string `json:"digest,omitempty"`
}

// DigestValue is what a plan's digest looks like.
var DigestValue = regexp.MustCompile(`^sha256:[0-9a-f]{16}$`)

// Digest identifies a plan: the configuration it was made of (a digest of the
// terraform files and variables) and the changes it makes, each resource's address,
// type and action, in a fixed order. A plan of another configuration, or one that
// changes other resources or changes them otherwise, has another digest.
func Digest(configuration string, changes []Change) string {
	var lines []string
	for _, c := range changes {
		if c.Action == "noop" || c.Action == "read" {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s\x00%s\x00%s", c.Address, c.Type, c.Action))
	}
	slices.Sort(lines)
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00", len(configuration), configuration)
	for _, l := range lines {
		fmt.Fprintf(h, "%d\x00%s\x00", len(l), l)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// HasChanges is true when the plan changes a resource.
func (p *Summary) HasChanges() bool {
	return p != nil && len(p.Addresses("create", "update", "delete", "replace", "import")) > 0
}

// Imports lists the addresses of the resources the plan imports.
func (p *Summary) Imports() []string {
	if p == nil {
		return nil
	}
	var addresses []string
	for _, c := range p.Changes {
		if c.Importing || c.Action == "import" {
			addresses = append(addresses, c.Address)
		}
	}
	return addresses
}

// Addresses lists the addresses of the changes with one of actions.
func (p *Summary) Addresses(actions ...string) []string {
	if p == nil {
		return nil
	}
	var addresses []string
	for _, c := range p.Changes {
		if slices.Contains(actions, c.Action) {
			addresses = append(addresses, c.Address)
		}
	}
	return addresses
}

// Destroys returns the changes that destroy, as replaced or deleted, a resource of one of
// types, or one they import of any type: an import names an object that exists already,
// perhaps what something else runs on, and is guarded as a protected resource is.
func (p *Summary) Destroys(types []string) []Change {
	if p == nil {
		return nil
	}
	var hits []Change
	for _, c := range p.Changes {
		if (c.Action == "delete" || c.Action == "replace") && (c.Importing || slices.Contains(types, c.Type)) {
			hits = append(hits, c)
		}
	}
	return hits
}

// Summary reads like "2 to add (a, b), 0 to change, 1 to replace (c), 0 to destroy",
// listing at most limit addresses per kind.
func (p *Summary) Summary(limit int) string {
	kinds := []struct{ name, action string }{{"add", "create"}, {"change", "update"}, {"replace", "replace"}, {"destroy", "delete"}}
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		addresses := p.Addresses(k.action)
		part := fmt.Sprintf("%d to %s", len(addresses), k.name)
		if len(addresses) > 0 {
			part += " (" + listed(addresses, limit) + ")"
		}
		parts = append(parts, part)
	}
	// Only a plan that imports says so: the summary of every other plan reads as before.
	if imports := p.Imports(); len(imports) > 0 {
		parts = append(parts, fmt.Sprintf("%d to import (%s)", len(imports), listed(imports, limit)))
	}
	return strings.Join(parts, ", ")
}

// DriftSummary lists the addresses changed outside terraform, at most limit of them.
func (p *Summary) DriftSummary(limit int) string {
	if p == nil {
		return ""
	}
	addresses := make([]string, len(p.Drift))
	for i, d := range p.Drift {
		addresses[i] = d.Address
	}
	return listed(addresses, limit)
}

// listed joins at most limit names, saying how many more there are.
// DestroysListed names at most limit of the changes that destroy or replace resources of
// the given types, each with its action, and how many more there are.
func (p *Summary) DestroysListed(types []string, limit int) string {
	hits := p.Destroys(types)
	described := make([]string, len(hits))
	for i, h := range hits {
		described[i] = fmt.Sprintf("%s (%s)", h.Address, h.Action)
		if h.Importing {
			described[i] = fmt.Sprintf("%s (import, %s)", h.Address, h.Action)
		}
	}
	return listed(described, limit)
}

func listed(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:limit], ", ") + fmt.Sprintf(" and %d more", len(names)-limit)
}
