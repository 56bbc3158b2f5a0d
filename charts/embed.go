// Package charts embeds the CRDs of the terraseed chart, so that the binary can install them.
package charts

import "embed"

// CRDs holds the generated CRD manifests under terraseed/crds.
//
//go:embed terraseed/crds/*.yaml
var CRDs embed.FS
