package label

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Value is name as a label value, which may be 63 characters long where a name may
// be 253: a longer name keeps its first 52 and a digest of the whole, so that the run
// objects of an owner with a long name can be created and still tell owners apart.
func Value(name string) string {
	const most = validation.LabelValueMaxLength
	if len(name) <= most {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:most-11] + "-" + hex.EncodeToString(sum[:])[:10]
}
