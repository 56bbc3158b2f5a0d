package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/terraseed/terraseed/terraform/run"
)

// Storage is the kind of object a state and everything stored beside it are kept in. Every
// object the state store reads, writes or deletes goes through it, so that all of them are
// of one kind.
type Storage string

const (
	// StorageConfigMap keeps the state in ConfigMaps, as Gardener's terraformer does: the
	// default, so that an Infrastructure the terraformer left is taken over as it is.
	StorageConfigMap Storage = "configmap"
	// StorageSecret keeps the state in Secrets: the built-in view role cannot read them,
	// and the API server's encryption at rest covers them.
	StorageSecret Storage = "secret"
)

// Storages are the kinds a state may be kept in.
var Storages = []Storage{StorageConfigMap, StorageSecret}

// ParseStorage accepts one of Storages, the empty string being the default; field names
// the setting in the error.
func ParseStorage(field, value string) (Storage, error) {
	if value == "" {
		return StorageConfigMap, nil
	}
	if !slices.Contains(Storages, Storage(value)) {
		return "", run.InvalidInput(field, fmt.Sprintf("%q is neither %s nor %s", value, StorageConfigMap, StorageSecret))
	}
	return Storage(value), nil
}

func (s Storage) orDefault() Storage {
	if s == StorageSecret {
		return StorageSecret
	}
	return StorageConfigMap
}

// Kind is the object kind, as errors and logs name it.
func (s Storage) Kind() string {
	if s.orDefault() == StorageSecret {
		return "Secret"
	}
	return "ConfigMap"
}

// Resource is the API resource, as RBAC rules name it.
func (s Storage) Resource() string {
	if s.orDefault() == StorageSecret {
		return "secrets"
	}
	return "configmaps"
}

// Other is the kind a state is moved from to be kept in this one.
func (s Storage) Other() Storage {
	if s.orDefault() == StorageSecret {
		return StorageConfigMap
	}
	return StorageSecret
}

// Object is an empty object of this kind, to read a state object into.
func (s Storage) Object() client.Object { return s.newObject(metav1.ObjectMeta{}).Object }

// object is one stored object of a state: a ConfigMap or a Secret. A Secret has no text
// data apart from its bytes: both go to its data.
type object struct {
	client.Object
	storage Storage
}

func (s Storage) newObject(meta metav1.ObjectMeta) *object {
	if s.orDefault() == StorageSecret {
		return &object{Object: &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque}, storage: StorageSecret}
	}
	return &object{Object: &corev1.ConfigMap{ObjectMeta: meta}, storage: StorageConfigMap}
}

func (o *object) kind() string { return o.storage.Kind() }

func (o *object) deepCopy() *object {
	return &object{Object: o.DeepCopyObject().(client.Object), storage: o.storage}
}

// text is the plain text held under key. A ConfigMap's is found in its binary data too,
// where a copy from a Secret, which keeps no text apart, may have put it.
func (o *object) text(key string) (string, bool) {
	switch obj := o.Object.(type) {
	case *corev1.Secret:
		v, ok := obj.Data[key]
		return string(v), ok
	case *corev1.ConfigMap:
		if v, ok := obj.Data[key]; ok {
			return v, ok
		}
		v, ok := obj.BinaryData[key]
		return string(v), ok
	}
	return "", false
}

// binary is the bytes held under key, in a ConfigMap's binary data or else its text.
func (o *object) binary(key string) []byte {
	switch obj := o.Object.(type) {
	case *corev1.Secret:
		return obj.Data[key]
	case *corev1.ConfigMap:
		if v, ok := obj.BinaryData[key]; ok {
			return v
		}
		if v, ok := obj.Data[key]; ok {
			return []byte(v)
		}
	}
	return nil
}

func (o *object) setText(key, value string) {
	switch obj := o.Object.(type) {
	case *corev1.Secret:
		obj.Data = withKey(obj.Data, key, []byte(value))
	case *corev1.ConfigMap:
		if obj.Data == nil {
			obj.Data = map[string]string{}
		}
		obj.Data[key] = value
		delete(obj.BinaryData, key)
	}
}

func (o *object) setBinary(key string, value []byte) {
	switch obj := o.Object.(type) {
	case *corev1.Secret:
		obj.Data = withKey(obj.Data, key, value)
	case *corev1.ConfigMap:
		delete(obj.Data, key)
		obj.BinaryData = withKey(obj.BinaryData, key, value)
	}
}

// setOnly makes key the only data of the object, as bytes.
func (o *object) setOnly(key string, value []byte) {
	switch obj := o.Object.(type) {
	case *corev1.Secret:
		obj.Data = map[string][]byte{key: value}
	case *corev1.ConfigMap:
		obj.Data = nil
		obj.BinaryData = map[string][]byte{key: value}
	}
}

// copyData takes every key of from, an object of either kind: a ConfigMap's text as text,
// anything else as bytes.
func (o *object) copyData(from *object) {
	switch src := from.Object.(type) {
	case *corev1.Secret:
		for key, value := range src.Data {
			o.setBinary(key, value)
		}
	case *corev1.ConfigMap:
		for key, value := range src.Data {
			o.setText(key, value)
		}
		for key, value := range src.BinaryData {
			o.setBinary(key, value)
		}
	}
}

func withKey(data map[string][]byte, key string, value []byte) map[string][]byte {
	if data == nil {
		data = map[string][]byte{}
	}
	data[key] = value
	return data
}

// get reads the object name of this kind.
func (s Storage) get(ctx context.Context, c client.Reader, key client.ObjectKey) (*object, error) {
	o := s.newObject(metav1.ObjectMeta{})
	if err := c.Get(ctx, key, o.Object); err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", s.Kind(), key.Name, err)
	}
	return o, nil
}

func (o *object) create(ctx context.Context, c client.Client) error {
	return c.Create(ctx, o.Object)
}

func (o *object) update(ctx context.Context, c client.Client) error {
	return c.Update(ctx, o.Object)
}

// createOrUpdate writes the object name of this kind as mutate makes it.
func (s Storage) createOrUpdate(ctx context.Context, c client.Client, meta metav1.ObjectMeta, mutate func(*object)) (*object, error) {
	o := s.newObject(meta)
	_, err := controllerutil.CreateOrUpdate(ctx, c, o.Object, func() error {
		mutate(o)
		return nil
	})
	return o, err
}

// delete removes the object name of this kind, releasing it first when it carries the run
// finalizer; one already gone is no error.
func (s Storage) delete(ctx context.Context, c client.Client, key client.ObjectKey) error {
	o := s.newObject(metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name})
	if err := c.Delete(ctx, o.Object); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", s.Kind(), key.Name, err)
	}
	return nil
}

// release removes the run finalizer of o, read just before.
func (o *object) release(ctx context.Context, c client.Client) error {
	base := o.DeepCopyObject().(client.Object)
	if !controllerutil.RemoveFinalizer(o.Object, Finalizer) {
		return nil
	}
	if err := c.Patch(ctx, o.Object, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing %s %s: %w", o.kind(), o.GetName(), err)
	}
	return nil
}

// list returns the objects of this kind in namespace with labels.
func (s Storage) list(ctx context.Context, c client.Reader, namespace string, labels map[string]string) ([]*object, error) {
	var objects []*object
	if s.orDefault() == StorageSecret {
		list := &corev1.SecretList{}
		if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
			return nil, fmt.Errorf("listing Secrets: %w", err)
		}
		for i := range list.Items {
			objects = append(objects, &object{Object: &list.Items[i], storage: StorageSecret})
		}
		return objects, nil
	}
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return nil, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	for i := range list.Items {
		objects = append(objects, &object{Object: &list.Items[i], storage: StorageConfigMap})
	}
	return objects, nil
}

// AnnotationMovedFrom marks a state copied from the other kind of object, until the
// copy it came from is deleted: a move cut short is finished by the next one.
const AnnotationMovedFrom = run.LabelPrefix + "state-moved-from"

// errNotMoved is returned when a run finds its state in the other kind of object than
// it keeps it in: the controller moves it before it starts a run.
var errNotMoved = errors.New("the state is kept in the other kind of object")

// storage is the kind this store keeps the state in.
func (s *Store) storage() Storage { return s.Objects.Storage.orDefault() }

// getEither reads the state object of this store's kind or, when there is none, of the
// other kind: a state is found whichever kind holds it, also during a move.
func (s *Store) getEither(ctx context.Context) (*object, error) {
	cm, err := s.get(ctx)
	if !apierrors.IsNotFound(err) {
		return cm, err
	}
	other, otherErr := s.storage().Other().get(ctx, s.Client, s.Objects.key(s.Objects.StateName()))
	if otherErr == nil {
		return other, nil
	}
	if apierrors.IsNotFound(otherErr) || apierrors.IsForbidden(otherErr) {
		return nil, err
	}
	return nil, otherErr
}

// PendingMove says whether Move has anything to do: the state is kept in the other kind of
// object, or a move was cut short. It reads the state object alone, and the other kind's
// only when this kind holds no state.
func (s *Store) PendingMove(ctx context.Context) (bool, error) {
	current, err := s.get(ctx)
	switch {
	case err == nil && current.GetAnnotations()[AnnotationMovedFrom] != "":
		return true, nil
	case err == nil && !emptyState(current):
		return false, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, err
	}
	_, err = s.storage().Other().get(ctx, s.Client, s.Objects.key(s.Objects.StateName()))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// Move moves the state, and every object kept beside it (its parts, whatever carries the
// label LabelPartOf naming it), from the other kind of object into this store's, when the
// other kind holds it: the new objects are written and read back whole before the old ones
// are deleted, so that at any time one of the two holds the whole state, and a move cut
// short is finished by the next. It runs no terraform, and must not run while a
// run writes the state. Move reports whether it moved or finished a move.
func (s *Store) Move(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	to, from := s.storage(), s.storage().Other()
	key := s.Objects.key(s.Objects.StateName())
	current, err := to.get(ctx, s.Client, key)
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return false, err
	case current.GetAnnotations()[AnnotationMovedFrom] == "" && !emptyState(current):
		return false, nil
	}
	// Until a move is marked finished, the old object is the state: a controller of the
	// other setting may have written it since. A move cut short is copied again.
	old, err := from.get(ctx, s.Client, key)
	if apierrors.IsNotFound(err) && current != nil && current.GetAnnotations()[AnnotationMovedFrom] != "" {
		return true, s.finishMove(ctx, current, from)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	state, err := s.decode(ctx, old)
	if err != nil {
		return false, fmt.Errorf("moving the state from %s %s: %w", old.kind(), old.GetName(), err)
	}
	if err := s.copyBeside(ctx, key, from, to); err != nil {
		return false, err
	}
	moved := s.movedState(current, old, from, to)
	if current == nil {
		err = moved.create(ctx, s.Client)
	} else {
		err = moved.update(ctx, s.Client)
	}
	if err != nil {
		return false, fmt.Errorf("writing %s %s: %w", to.Kind(), moved.GetName(), err)
	}
	s.last, s.knownVersion = nil, ""
	// What is deleted next must be read back whole from the new objects first.
	copied, err := s.decode(ctx, moved)
	if err != nil {
		return false, fmt.Errorf("reading the moved state back from %s %s: %w", moved.kind(), moved.GetName(), err)
	}
	if !bytes.Equal(copied, state) {
		return false, fmt.Errorf("%w: %s %s does not read back as the state of %s %s", ErrCorrupt, moved.kind(), moved.GetName(), old.kind(), old.GetName())
	}
	return true, s.finishMove(ctx, moved, from)
}

// copyBeside writes what is kept beside the state in the kind from (its history) into the
// kind to, before the state itself moves.
func (s *Store) copyBeside(ctx context.Context, key client.ObjectKey, from, to Storage) error {
	beside, err := from.list(ctx, s.Client, key.Namespace, partOf(key.Name))
	if err != nil {
		return err
	}
	for _, o := range beside {
		if _, err := to.createOrUpdate(ctx, s.Client, metav1.ObjectMeta{Namespace: key.Namespace, Name: o.GetName()}, func(copied *object) {
			copied.SetLabels(mergeMaps(copied.GetLabels(), o.GetLabels()))
			copied.SetAnnotations(mergeMaps(copied.GetAnnotations(), o.GetAnnotations()))
			copied.copyData(o)
		}); err != nil {
			return fmt.Errorf("writing %s %s: %w", to.Kind(), o.GetName(), err)
		}
	}
	return nil
}

// movedState is the state object of the kind to that a move writes: old's labels,
// annotations and state, marked as moved from the kind from, over current when there is
// one (an empty state, or a copy a move cut short left).
func (s *Store) movedState(current, old *object, from, to Storage) *object {
	moved := to.newObject(s.Objects.meta(s.Objects.StateName()))
	if current != nil {
		moved = current
		// What the copy it is replaced with does not say must not stay.
		annotations := moved.GetAnnotations()
		for _, key := range []string{annotationEncoding, annotationParts, AnnotationGeneration, annotationDigest, AnnotationSerial, AnnotationLineage} {
			delete(annotations, key)
		}
		moved.SetAnnotations(annotations)
	}
	moved.SetLabels(mergeMaps(moved.GetLabels(), old.GetLabels()))
	moved.SetAnnotations(mergeMaps(moved.GetAnnotations(), old.GetAnnotations()))
	annotations := moved.GetAnnotations()
	annotations[AnnotationMovedFrom] = string(from)
	moved.SetAnnotations(annotations)
	controllerutil.AddFinalizer(moved.Object, Finalizer)
	if annotations[annotationEncoding] == "" {
		text, _ := old.text(Key)
		moved.setText(Key, text)
	} else {
		moved.setBinary(Key, old.binary(Key))
	}
	return moved
}

// finishMove deletes the state, and everything kept beside it, in the kind from, and then
// the mark of the move on moved.
func (s *Store) finishMove(ctx context.Context, moved *object, from Storage) error {
	key := s.Objects.key(s.Objects.StateName())
	if old, err := from.get(ctx, s.Client, key); err == nil {
		if err := old.release(ctx, s.Client); err != nil {
			return err
		}
		if err := from.delete(ctx, s.Client, key); err != nil {
			return err
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	parts, err := from.list(ctx, s.Client, key.Namespace, partOf(key.Name))
	if err != nil {
		return err
	}
	for _, part := range parts {
		if err := from.delete(ctx, s.Client, client.ObjectKeyFromObject(part)); err != nil {
			return err
		}
	}
	base := moved.DeepCopyObject().(client.Object)
	annotations := moved.GetAnnotations()
	delete(annotations, AnnotationMovedFrom)
	moved.SetAnnotations(annotations)
	if err := s.Client.Patch(ctx, moved.Object, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("marking %s %s moved: %w", moved.kind(), moved.GetName(), err)
	}
	return nil
}

// emptyState is true for a state object that holds no state, as a run's claim creates it.
func emptyState(o *object) bool {
	if o.GetAnnotations()[annotationEncoding] != "" {
		return false
	}
	v, _ := o.text(Key)
	return len(bytes.TrimSpace([]byte(v))) == 0
}

func mergeMaps(into, from map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	maps.Copy(into, from)
	return into
}

// Found is o with the Storage of the kind of object that holds its state: a Secret where
// one does, else a ConfigMap. For a reader that does not know the controller's setting,
// such as the state commands.
func (o RunObjects) Found(ctx context.Context, c client.Reader) (RunObjects, error) {
	_, err := StorageSecret.get(ctx, c, o.key(o.StateName()))
	switch {
	case err == nil:
		o.Storage = StorageSecret
	case apierrors.IsNotFound(err):
		o.Storage = StorageConfigMap
	default:
		return o, err
	}
	return o, nil
}
