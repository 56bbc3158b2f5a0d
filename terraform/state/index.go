package state

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
)

// AnnotationIndex holds the imports.Index of the state in the state object: written with
// the state, so that keeping it costs no request of its own.
const AnnotationIndex = run.LabelPrefix + "state-index"

// SetImportIDs has the store index every state it writes from now on.
func (s *Store) SetImportIDs(ids *imports.IDs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.importIDs = ids
}

// annotateIndex puts the index of state into annotations, the state object's. A state
// that cannot be indexed keeps no index: an index never describes another state than the
// one it names.
func (s *Store) annotateIndex(annotations map[string]string, state []byte) {
	if s.importIDs == nil {
		return
	}
	delete(annotations, AnnotationIndex)
	index, err := s.importIDs.Index(state)
	if err != nil {
		return
	}
	if encoded, err := imports.Encode(index); err == nil {
		annotations[AnnotationIndex] = encoded
	}
}

// storedIndex is the index kept with the state in cm; nil when there is none or it cannot
// be read.
func storedIndex(obj client.Object) *imports.Index {
	index, err := imports.Decode(obj.GetAnnotations()[AnnotationIndex])
	if err != nil {
		return nil
	}
	return index
}
