package state

import (
	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
)

// AnnotationIndex holds the imports.Index of the state in the state object, written with
// the state by whoever writes it, a run among them. It is for an operator to read, and
// no controller reads it back: whoever may update the state object may write it, so a
// recovery trusts only the index the controller wrote itself (the Infrastructure's
// .status.state) and the states it decodes under its bound.
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
