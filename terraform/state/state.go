package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/label"
	"github.com/terraseed/terraseed/terraform/run/tracing"
)

// defaultObjectLimit is the most state bytes one object holds: the API server's 1 MiB
// limit less room for the object's metadata.
const defaultObjectLimit = 1000 * 1024

// MaxSize is the most bytes a terraform state may take, decoded. A compressed state
// is never expanded beyond it, so that a small object cannot make the controller or a run
// pod allocate gigabytes, and no larger state is written, so that every stored state can
// be read back. Real states take kilobytes to a few MiB.
const MaxSize = 64 << 20

const (
	// annotationEncoding names the encoding of a state that did not fit one object as plain text.
	annotationEncoding = run.LabelPrefix + "state-encoding"
	// encodingGzip is the only encoding: the state is gzip-compressed into binaryData.
	encodingGzip = "gzip"
	// annotationParts is the number of objects a compressed state is split across.
	annotationParts = run.LabelPrefix + "state-parts"
	// AnnotationGeneration names the set of part objects of the current state, so that
	// a state is switched to a new set of parts in one update of the main object.
	AnnotationGeneration = run.LabelPrefix + "state-generation"
	// annotationDigest is the SHA-256 of the decoded state, checked when reading.
	annotationDigest = run.LabelPrefix + "state-sha256"
	// AnnotationSerial and AnnotationLineage record the serial and lineage of the
	// state this store wrote, so that the next write need not decode it to compare.
	AnnotationSerial  = run.LabelPrefix + "state-serial"
	AnnotationLineage = run.LabelPrefix + "state-lineage"
	// LabelPartOf marks the part objects of a state with the name of its main object, as
	// a label value has it (run.LabelValue).
	LabelPartOf = run.LabelPrefix + "state-of"
)

// partOf labels what is kept beside the state of the object stateName: its parts, its history.
func partOf(stateName string) map[string]string {
	return map[string]string{LabelPartOf: label.Value(stateName)}
}

var (
	// ErrInvalid is returned for bytes that are not a complete terraform state,
	// such as a state file read while terraform was writing it.
	ErrInvalid = imports.ErrInvalid
	// ErrLineageMismatch is returned when a state of another lineage would replace the stored one.
	ErrLineageMismatch = errors.New("the state belongs to another lineage than the stored state")
	// ErrStale is returned when the store holds a newer snapshot of the state than the
	// one to save: the save is skipped, and that is never silent.
	ErrStale = errors.New("the store holds a newer state")
	// ErrOverBound is returned for a state larger than the store decodes (MaxSize).
	ErrOverBound = errors.New("the terraform state exceeds what this controller decodes")
	// ErrCorrupt is returned when the stored parts do not reassemble to the recorded state.
	ErrCorrupt = errors.New("the stored state is corrupt")
	// ErrNotReadNow is returned for a stored state whose parts cannot be read now: one is
	// missing however often it is read, or the API server does not answer for it. The
	// state is not corrupt, and not lost.
	ErrNotReadNow = errors.New("the stored state cannot be read now")
	// errTooLarge is returned for a state larger than MaxSize, decoded.
	errTooLarge = fmt.Errorf("the terraform state exceeds %d bytes (%d MiB), the most a state may take", MaxSize, MaxSize>>20)
)

// Store reads and writes a run's state object, a ConfigMap or a Secret (Storage). It
// remembers the newest state it has seen so that an older snapshot is never written over a
// newer one.
type Store struct {
	Client  client.Client
	Objects RunObjects
	// Limit is the most state bytes stored in one object.
	Limit int
	// MaxSize is the most bytes a state is decoded to, below MaxSize: what the
	// controller is given per state; 0 is MaxSize.
	MaxSize int

	mu     sync.Mutex
	known  stateMeta
	writes int
	// lastParts is how many objects the last write took: its main object and the parts.
	lastParts int
	// last is the object as this store last wrote it: a save starts from it instead of
	// reading the object again, and a conflict sends it back to reading.
	last *object
	// knownVersion is the resourceVersion of the object whose state known is, as this
	// store wrote or decoded it; an object of another version is decoded again.
	knownVersion string
	// importIDs index every state this store writes; without them the index written
	// last stays, naming the serial it describes.
	importIDs *imports.IDs
}

// stateMeta is what orders two snapshots of a state.
type stateMeta struct {
	Version int    `json:"version"`
	Serial  int64  `json:"serial"`
	Lineage string `json:"lineage"`
}

func (m stateMeta) empty() bool { return m.Lineage == "" }

// parseStateMeta rejects anything that is not one complete JSON state document.
func parseStateMeta(state []byte) (stateMeta, error) {
	var m stateMeta
	if err := json.Unmarshal(state, &m); err != nil {
		return m, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if m.Version == 0 || m.Lineage == "" {
		return m, fmt.Errorf("%w: no version or lineage", ErrInvalid)
	}
	return m, nil
}

// Writes is the number of state updates this store has sent to the API server.
func (s *Store) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// Load returns the stored state, or nil when none has been written yet.
func (s *Store) Load(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cm, err := s.getEither(ctx)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cm, state, err := s.decodeAgain(ctx, cm, s.getEither)
	if err != nil {
		return nil, err
	}
	s.remember(cm, state)
	return state, nil
}

// read decodes the state of cm and remembers it as the newest known.
func (s *Store) read(ctx context.Context, cm *object) ([]byte, error) {
	state, err := s.decode(ctx, cm)
	if err != nil {
		return nil, err
	}
	s.remember(cm, state)
	return state, nil
}

// remember takes the state decoded of cm for the newest known.
func (s *Store) remember(cm *object, state []byte) {
	if m, err := parseStateMeta(state); err == nil && cm.storage == s.storage() {
		s.known, s.knownVersion = m, cm.GetResourceVersion()
	}
}

// decodeAgain decodes the state of cm and, when one of its parts is missing, reads the
// object (with get) and its parts once more: a save under way may have switched the
// state to the other generation's parts in between. It returns the object it decoded. A
// part still missing, or one the API server does not answer for, is ErrNotReadNow naming
// the part; the state is not taken for corrupt, nor for lost.
func (s *Store) decodeAgain(ctx context.Context, cm *object, get func(context.Context) (*object, error)) (*object, []byte, error) {
	state, err := s.decode(ctx, cm)
	if missingPart(err) {
		again, getErr := get(ctx)
		if getErr != nil {
			return nil, nil, fmt.Errorf("%s %s: %w; reading it again: %w", cm.kind(), cm.GetName(), err, getErr)
		}
		cm = again
		if state, err = s.decode(ctx, cm); missingPart(err) {
			err = fmt.Errorf("%w (the object and its parts read twice)", err)
		}
	}
	if _, ok := errors.AsType[*partError](err); ok {
		return nil, nil, fmt.Errorf("%s %s: %w", cm.kind(), cm.GetName(), err)
	}
	return cm, state, err
}

// Save stores state unless the store already holds the same or a newer snapshot of it.
// It reports whether it wrote.
func (s *Store) Save(ctx context.Context, state []byte) (saved bool, err error) {
	ctx, span := tracing.Start(ctx, "state.save", attribute.Int("terraseed.state.bytes", len(state)))
	parts := 0
	defer func() {
		tracing.Set(span, attribute.Bool("terraseed.state.written", saved), attribute.Int("terraseed.state.parts", parts))
		tracing.Fail(span, err)
		span.End()
	}()
	m, err := parseStateMeta(state)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if stale, err := olderOrSame(m, s.known); stale || err != nil {
		return false, staleError(err, s.storage().Kind()+" "+s.Objects.StateName(), m, s.known)
	}
	written := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := s.cachedOrGet(ctx)
		if err != nil {
			return err
		}
		stored, err := s.storedMeta(ctx, cm)
		if err != nil {
			return err
		}
		if stale, err := olderOrSame(m, stored); stale || err != nil {
			s.known, s.knownVersion = stored, cm.GetResourceVersion()
			return staleError(err, cm.kind()+" "+cm.GetName(), m, stored)
		}
		if err := s.write(ctx, cm, state, m); err != nil {
			return err
		}
		written, parts = true, s.lastParts
		return nil
	})
	if err != nil {
		return false, err
	}
	if written {
		s.known, s.knownVersion = m, s.last.GetResourceVersion()
	}
	return written, nil
}

// staleError is err, or, for a state older than the stored one, ErrStale naming both
// serials: a skipped save is never silent. The same snapshot again is no error.
func staleError(err error, name string, next, stored stateMeta) error {
	if err != nil || next.Serial >= stored.Serial {
		return err
	}
	return fmt.Errorf("%w: %s holds serial %d of lineage %s, the state to save has serial %d",
		ErrStale, name, stored.Serial, stored.Lineage, next.Serial)
}

// Restore stores a state kept elsewhere (an Infrastructure's .status.state) as the run's
// state, unless the stored state is a newer or the same snapshot of it: a restore that is
// retried after an apply wrote a newer serial keeps what that apply created. A stored state
// of another lineage is refused with ErrLineageMismatch naming both. Restore reports
// whether it wrote.
func (s *Store) Restore(ctx context.Context, state []byte) (bool, error) {
	m, err := parseStateMeta(state)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	written := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		written = false
		cm, err := s.getOrNew(ctx)
		if err != nil {
			return err
		}
		stored, err := s.storedMeta(ctx, cm)
		if err != nil {
			return err
		}
		if !stored.empty() && stored.Lineage != m.Lineage {
			return fmt.Errorf("%w: %s %s holds lineage %s (serial %d), the state to restore is of lineage %s (serial %d)",
				ErrLineageMismatch, cm.kind(), cm.GetName(), stored.Lineage, stored.Serial, m.Lineage, m.Serial)
		}
		if !stored.empty() && stored.Serial >= m.Serial {
			s.known, s.knownVersion = stored, cm.GetResourceVersion()
			return nil
		}
		if err := s.write(ctx, cm, state, m); err != nil {
			return err
		}
		s.known, s.knownVersion = m, s.last.GetResourceVersion()
		written = true
		return nil
	})
	return written, err
}

// olderOrSame says whether next is not newer than stored; a state of another lineage is an error.
func olderOrSame(next, stored stateMeta) (bool, error) {
	if stored.empty() {
		return false, nil
	}
	if next.Lineage != stored.Lineage {
		return true, fmt.Errorf("%w: stored %s, new %s", ErrLineageMismatch, stored.Lineage, next.Lineage)
	}
	return next.Serial <= stored.Serial, nil
}

func (s *Store) get(ctx context.Context) (*object, error) {
	return s.storage().get(ctx, s.Client, s.Objects.key(s.Objects.StateName()))
}

func (s *Store) cachedOrGet(ctx context.Context) (*object, error) {
	if s.last != nil {
		cm := s.last.deepCopy()
		s.last = nil
		return cm, nil
	}
	return s.getOrNew(ctx)
}

func (s *Store) getOrNew(ctx context.Context) (*object, error) {
	cm, err := s.get(ctx)
	if apierrors.IsNotFound(err) {
		return s.storage().newObject(s.Objects.meta(s.Objects.StateName())), nil
	}
	return cm, err
}

// Claim returns the stored state, like Load, for a run that owns it: the state object
// carries the run finalizer afterwards, and is created empty, as Gardener's terraformer
// does, when it is missing, so that a state can be written back at any time. A state kept
// in the other kind of object is refused (errNotMoved): a run never starts afresh
// beside it.
func (s *Store) Claim(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cm, err := s.getEither(ctx)
	if err == nil && cm.storage != s.storage() {
		return nil, fmt.Errorf("%w: %s %s holds it, this run keeps it in a %s", errNotMoved, cm.kind(), cm.GetName(), s.storage().Kind())
	}
	if apierrors.IsNotFound(err) {
		cm = s.storage().newObject(s.Objects.meta(s.Objects.StateName()))
		cm.setText(Key, "")
		controllerutil.AddFinalizer(cm, Finalizer)
		if err = cm.create(ctx, s.Client); apierrors.IsAlreadyExists(err) {
			cm, err = s.get(ctx)
		} else if err != nil {
			err = fmt.Errorf("creating %s %s: %w", cm.kind(), s.Objects.StateName(), err)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := claim(ctx, s.Client, cm.Object); err != nil {
		return nil, err
	}
	s.last = cm.deepCopy()
	return s.read(ctx, cm)
}

// storedMeta reads the serial and lineage of the stored state from the state itself,
// decoding it unless it is the version of the object this store wrote or decoded last. The
// annotations recording them are never trusted: a run pod may update its state object,
// and a forged serial there would skip every later save.
func (s *Store) storedMeta(ctx context.Context, cm *object) (stateMeta, error) {
	if cm.GetResourceVersion() == "" {
		return stateMeta{}, nil
	}
	if cm.GetResourceVersion() == s.knownVersion && !s.known.empty() {
		return s.known, nil
	}
	state, err := s.decode(ctx, cm)
	if err != nil {
		return stateMeta{}, err
	}
	if len(bytes.TrimSpace(state)) == 0 {
		return stateMeta{}, nil
	}
	m, err := parseStateMeta(state)
	if err != nil {
		return stateMeta{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return m, nil
}

func (s *Store) partName(generation string, i int) string {
	return fmt.Sprintf("%s.%s-%d", s.Objects.StateName(), generation, i)
}

func (s *Store) decode(ctx context.Context, cm *object) ([]byte, error) {
	encoding := cm.GetAnnotations()[annotationEncoding]
	if encoding == "" {
		if v, ok := cm.text(Key); ok && v != "" {
			if len(v) > s.maxSize() {
				return nil, s.overBound(cm.kind() + " " + cm.GetName())
			}
			return []byte(v), nil
		}
		return nil, nil
	}
	if encoding != encodingGzip {
		return nil, fmt.Errorf("%w: %s %s: unknown encoding %q", ErrCorrupt, cm.kind(), cm.GetName(), encoding)
	}
	parts := 1
	if v, ok := cm.GetAnnotations()[annotationParts]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: %s %s: annotation %s=%q", ErrCorrupt, cm.kind(), cm.GetName(), annotationParts, v)
		}
		parts = n
	}
	// gzip grows an incompressible state by a few bytes in a thousand: one part more.
	if maxParts := MaxSize/s.objectLimit() + 2; parts > maxParts {
		return nil, fmt.Errorf("%w: %s %s: annotation %s=%q: more parts than a state of at most %d bytes takes (%d)",
			ErrCorrupt, cm.kind(), cm.GetName(), annotationParts, cm.GetAnnotations()[annotationParts], MaxSize, maxParts)
	}
	// The parts are read one at a time as the state is decompressed, and the digest is
	// taken as it is: what is held is the state, not its compressed copy too.
	compressed := &partsReader{ctx: ctx, store: s, storage: cm.storage, generation: cm.GetAnnotations()[AnnotationGeneration], parts: parts,
		current: bytes.NewReader(cm.binary(Key)), next: 1}
	state, sum, err := gunzip(compressed, s.maxSize())
	switch {
	case compressed.err != nil:
		return nil, compressed.err
	case errors.Is(err, errOverLimit) && s.maxSize() < MaxSize:
		return nil, s.overBound(cm.kind() + " " + cm.GetName())
	case errors.Is(err, errOverLimit):
		err = fmt.Errorf("%w: it expands to more, compressed", errTooLarge)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrCorrupt, cm.kind(), cm.GetName(), err)
	}
	if want := cm.GetAnnotations()[annotationDigest]; want != "" && want != sum {
		return nil, fmt.Errorf("%w: %s %s: digest mismatch", ErrCorrupt, cm.kind(), cm.GetName())
	}
	return state, nil
}

// maxSize is the most bytes this store decodes a state to.
func (s *Store) maxSize() int {
	if s.MaxSize > 0 && s.MaxSize < MaxSize {
		return s.MaxSize
	}
	return MaxSize
}

func (s *Store) overBound(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the state expands to more than %d bytes (%.1f MiB), the most this controller decodes of one state (--max-state-size, from its memory limit)",
			ErrOverBound, s.maxSize(), float64(s.maxSize())/(1<<20))
	}
	return fmt.Errorf("%w: %s: the state expands to more than %d bytes (%.1f MiB), the most this controller decodes of one state (--max-state-size, from its memory limit)",
		ErrOverBound, name, s.maxSize(), float64(s.maxSize())/(1<<20))
}

// partsReader reads a compressed state from its main object and then its parts, each
// read from the API server when the one before is used up.
type partsReader struct {
	ctx         context.Context
	store       *Store
	storage     Storage
	generation  string
	current     *bytes.Reader
	next, parts int
	err         error
}

func (r *partsReader) Read(p []byte) (int, error) {
	for {
		n, err := r.current.Read(p)
		if err != io.EOF || n > 0 {
			return n, nil
		}
		if r.next >= r.parts {
			return 0, io.EOF
		}
		name := r.store.partName(r.generation, r.next)
		part, err := r.storage.get(r.ctx, r.store.Client, r.store.Objects.key(name))
		if err != nil {
			r.err = &partError{kind: r.storage.Kind(), name: name, part: r.next + 1, parts: r.parts, err: err}
			return 0, r.err
		}
		r.current, r.next = bytes.NewReader(part.binary(Key)), r.next+1
	}
}

// partError is a part of a split state that could not be read.
type partError struct {
	kind, name  string
	part, parts int
	err         error
}

func (e *partError) Error() string {
	return fmt.Sprintf("reading part %d of %d, %s %s: %v", e.part, e.parts, e.kind, e.name, e.err)
}

func (e *partError) Unwrap() []error { return []error{ErrNotReadNow, e.err} }

// missingPart says whether err is a part of a split state that was not found: a save
// under way may have switched the state to the other generation's parts since the main
// object was read.
func missingPart(err error) bool {
	var part *partError
	return errors.As(err, &part) && apierrors.IsNotFound(part.err)
}

// errOverLimit is gunzip's: the state expands beyond its limit.
var errOverLimit = errors.New("over the limit")

// gunzip decompresses a gzipped state of at most limit bytes, refusing with errOverLimit
// to expand it further, and returns it with its SHA-256, taken as it is read.
func gunzip(compressed io.Reader, limit int) ([]byte, string, error) {
	zr, err := gzip.NewReader(compressed)
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	var state bytes.Buffer
	n, err := io.Copy(io.MultiWriter(&state, h), io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, "", err
	}
	if n > int64(limit) {
		return nil, "", errOverLimit
	}
	return state.Bytes(), hex.EncodeToString(h.Sum(nil)), nil
}

// GunzipAtMost is Gunzip refusing with ErrOverBound, naming the figure, to expand the
// state beyond limit bytes (0: MaxSize).
func GunzipAtMost(compressed io.Reader, limit int) ([]byte, error) {
	s := &Store{MaxSize: limit}
	state, _, err := gunzip(compressed, s.maxSize())
	switch {
	case errors.Is(err, errOverLimit) && s.maxSize() < MaxSize:
		return nil, s.overBound("")
	case errors.Is(err, errOverLimit):
		return nil, fmt.Errorf("%w: it expands to more, compressed", errTooLarge)
	}
	return state, err
}

// Gunzip decompresses a gzipped terraform state, refusing with errTooLarge to
// expand it beyond MaxSize.
func Gunzip(compressed io.Reader) ([]byte, error) {
	state, _, err := gunzip(compressed, MaxSize)
	if errors.Is(err, errOverLimit) {
		return nil, fmt.Errorf("%w: it expands to more, compressed", errTooLarge)
	}
	return state, err
}

func (s *Store) objectLimit() int {
	if s.Limit > 0 {
		return s.Limit
	}
	return defaultObjectLimit
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// write stores state into cm and its parts. New parts are written under the other of two
// generations before the main object points to them, so a crash in between leaves the old
// state whole; the parts of the old generation are deleted after. Part names are fixed
// (see PartNames), so that a run's Role can name every object it may write.
// It is long because the order of its writes is what keeps the state whole, and it
// reads best as that one sequence.
func (s *Store) write(ctx context.Context, cm *object, state []byte, m stateMeta) error {
	if len(state) > MaxSize {
		return fmt.Errorf("writing %s %s: %w: it takes %d bytes", cm.kind(), cm.GetName(), errTooLarge, len(state))
	}
	annotations := cm.GetAnnotations()
	previous, previousParts := annotations[AnnotationGeneration], 1
	if n, err := strconv.Atoi(annotations[annotationParts]); err == nil && n > 1 {
		previousParts = min(n, MaxSize/s.objectLimit()+2)
	}
	for _, key := range []string{annotationEncoding, annotationParts, AnnotationGeneration, annotationDigest, AnnotationSerial, AnnotationLineage} {
		delete(annotations, key)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	controllerutil.AddFinalizer(cm.Object, Finalizer)
	if !m.empty() {
		annotations[AnnotationSerial] = strconv.FormatInt(m.Serial, 10)
		annotations[AnnotationLineage] = m.Lineage
	}
	s.annotateIndex(annotations, state)
	generation := ""
	s.lastParts = 1
	if len(state) <= s.Limit {
		cm.setText(Key, string(state))
	} else {
		chunks, err := compressAndSplit(state, s.Limit)
		if err != nil {
			return err
		}
		generation = generationA
		if previous == generationA {
			generation = generationB
		}
		for i := 1; i < len(chunks); i++ {
			if err := s.writePart(ctx, generation, i, chunks[i]); err != nil {
				return err
			}
		}
		cm.setBinary(Key, chunks[0])
		annotations[annotationEncoding] = encodingGzip
		annotations[annotationParts] = strconv.Itoa(len(chunks))
		s.lastParts = len(chunks)
		annotations[AnnotationGeneration] = generation
		annotations[annotationDigest] = digest(state)
	}
	cm.SetAnnotations(annotations)
	var err error
	if cm.GetResourceVersion() == "" {
		err = cm.create(ctx, s.Client)
	} else {
		err = cm.update(ctx, s.Client)
	}
	if err != nil {
		return fmt.Errorf("writing %s %s: %w", cm.kind(), cm.GetName(), err)
	}
	s.writes++
	s.last = cm.deepCopy()
	if previous == "" || previous == generation {
		return nil
	}
	return s.deleteParts(ctx, previous, previousParts)
}

// The two generations a split state alternates between.
const (
	generationA = "a"
	generationB = "b"
)

// PartNames are the names every part of a split state of this run may have: a Role's
// resourceNames for them.
func (o RunObjects) PartNames() []string {
	store := o.Store(nil)
	maxParts := MaxSize/store.objectLimit() + 2
	names := make([]string, 0, 2*maxParts)
	for _, generation := range []string{generationA, generationB} {
		for i := 1; i < maxParts; i++ {
			names = append(names, store.partName(generation, i))
		}
	}
	return names
}

// LegacyPartNames are the names of the parts of the stored state cm when an older
// release wrote them, under a generation named by the state's digest; nil otherwise.
func (o RunObjects) LegacyPartNames(cm metav1.Object) []string {
	generation := cm.GetAnnotations()[AnnotationGeneration]
	parts, err := strconv.Atoi(cm.GetAnnotations()[annotationParts])
	if generation == "" || generation == generationA || generation == generationB || err != nil {
		return nil
	}
	store := o.Store(nil)
	if maxParts := MaxSize/store.objectLimit() + 2; parts > maxParts {
		return nil
	}
	var names []string
	for i := 1; i < parts; i++ {
		names = append(names, store.partName(generation, i))
	}
	return names
}

func compressAndSplit(state []byte, limit int) ([][]byte, error) {
	compressed, err := Gzip(state, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	var chunks [][]byte
	for len(compressed) > limit {
		chunks = append(chunks, compressed[:limit])
		compressed = compressed[limit:]
	}
	return append(chunks, compressed), nil
}

func (s *Store) writePart(ctx context.Context, generation string, i int, chunk []byte) error {
	name := s.partName(generation, i)
	_, err := s.storage().createOrUpdate(ctx, s.Client, s.Objects.meta(name), func(part *object) {
		part.SetLabels(mergeMaps(mergeMaps(part.GetLabels(), partOf(s.Objects.StateName())), map[string]string{labelGeneration: generation}))
		part.setOnly(Key, chunk)
	})
	if err != nil {
		return fmt.Errorf("writing state part %s: %w", name, err)
	}
	return nil
}

const labelGeneration = run.LabelPrefix + "state-generation"

// deleteParts removes, one by one, the parts of a generation that is no longer current.
func (s *Store) deleteParts(ctx context.Context, generation string, parts int) error {
	for i := 1; i < parts; i++ {
		if err := s.storage().delete(ctx, s.Client, s.Objects.key(s.partName(generation, i))); err != nil {
			return fmt.Errorf("deleting stale state part: %w", err)
		}
	}
	return nil
}
