package state

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/terraseed/terraseed/terraform/run"
)

const (
	// Key is the key of the state file in the state ConfigMap, as Gardener's terraformer writes it.
	Key = "terraform.tfstate"
	// VarsJSONKey is the key of the variables file in the vars Secret.
	VarsJSONKey = "terraform.tfvars.json"
	// VarsHCLKey is the key Gardener's terraformer uses for its variables file.
	VarsHCLKey = "terraform.tfvars"

	// Finalizer keeps the run objects while a run owns them; removed after a successful destroy.
	Finalizer = run.LabelPrefix + "terraformer"
)

// Options are how a controller keeps the states of its runs: built once from its flags and
// handed to the actuator and the executors alike, so that every run's objects are kept
// and bounded the same way.
type Options struct {
	// Storage is the kind of object a state is kept in; empty is StorageConfigMap.
	Storage Storage
	// MaxSize is the most bytes a state is decoded to; 0 is MaxSize, the most a state may
	// take.
	MaxSize int
	// HistoryDepth is how many states of each owner are kept besides the live one: 0 is
	// DefaultHistoryDepth, below 0 none.
	HistoryDepth int
}

// History is the number of states kept besides the live one.
func (o Options) History() int {
	switch {
	case o.HistoryDepth == 0:
		return DefaultHistoryDepth
	case o.HistoryDepth < 0:
		return 0
	}
	return o.HistoryDepth
}

// Objects are the run objects of id, kept as these options say.
func (o Options) Objects(id run.ID) RunObjects { return RunObjects{ID: id, Options: o} }

// RunObjects names the objects of a terraform run and reads, writes and deletes them: the
// configuration, variables and state a run reads and writes, and the Secrets the
// controller keeps beside them, the credentials of the last run and the sensitive outputs.
type RunObjects struct {
	ID run.ID
	// Config, Vars and State override the names derived from ID, for runs whose objects
	// another tool named.
	Config, Vars, State string
	Options
}

// ConfigName is the ConfigMap holding the terraform files.
func (o RunObjects) ConfigName() string { return cmp.Or(o.Config, o.ID.ConfigName()) }

// VarsName is the Secret holding the variables.
func (o RunObjects) VarsName() string { return cmp.Or(o.Vars, o.ID.VarsName()) }

// StateName is the object (see Storage) holding the state.
func (o RunObjects) StateName() string { return cmp.Or(o.State, o.ID.StateName()) }

func (o RunObjects) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: o.ID.Namespace, Name: name}
}

func (o RunObjects) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: o.ID.Namespace, Name: name, Labels: o.ID.Labels()}
}

// LabelObject says which of a run's inputs and outputs an object is: its configuration,
// variables, credentials, sensitive outputs. The state object carries none, nor do its
// parts and history, which carry LabelPartOf: the controller caches the metadata of the
// state objects alone, whose deletion it watches, by these two labels' absence.
const LabelObject = run.LabelPrefix + "object"

// inputMeta is meta for one of the run's objects other than its state, named by object.
func (o RunObjects) inputMeta(name, object string) metav1.ObjectMeta {
	meta := o.meta(name)
	meta.Labels[LabelObject] = object
	return meta
}

// WriteOption changes how an object is written.
type WriteOption func(*writeOptions)

type writeOptions struct{ createFirst bool }

// CreateFirst says the object most likely does not exist yet, as on an Infrastructure's
// first run: it is created without being read first, and read and updated only if it
// exists after all. One request instead of two.
func CreateFirst(likelyNew bool) WriteOption {
	return func(o *writeOptions) { o.createFirst = likelyNew }
}

// writeObject creates obj or updates it to what mutate makes of it, like
// controllerutil.CreateOrUpdate.
func writeObject(ctx context.Context, c client.Client, obj client.Object, mutate controllerutil.MutateFn, opts ...WriteOption) error {
	var options writeOptions
	for _, opt := range opts {
		opt(&options)
	}
	if options.createFirst {
		fresh := obj.DeepCopyObject().(client.Object)
		if err := mutate(); err != nil {
			return err
		}
		err := c.Create(ctx, obj)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Back to the object as given: the read below fills it in, and mutate, which
		// holds the same pointer, changes it again.
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	}
	// An object written before it was labelled takes the labels it is written with.
	labels := maps.Clone(obj.GetLabels())
	_, err := controllerutil.CreateOrUpdate(ctx, c, obj, func() error {
		obj.SetLabels(mergeMaps(obj.GetLabels(), labels))
		return mutate()
	})
	return err
}

// The run objects are written with the run finalizer, so that a run finds them claimed
// and spends no requests on it; objects another tool wrote are claimed by the run.

// WriteConfig creates or replaces the terraform files (file name to content).
func (o RunObjects) WriteConfig(ctx context.Context, c client.Client, files map[string]string, opts ...WriteOption) error {
	if err := o.ID.Validate(); err != nil {
		return err
	}
	if len(files) == 0 {
		return run.InvalidInput("files", "must hold at least one terraform file")
	}
	cm := &corev1.ConfigMap{ObjectMeta: o.inputMeta(o.ConfigName(), "config")}
	err := writeObject(ctx, c, cm, func() error {
		controllerutil.AddFinalizer(cm, Finalizer)
		cm.Data = maps.Clone(files)
		cm.BinaryData = nil
		return nil
	}, opts...)
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s: %w", o.ConfigName(), err)
	}
	return nil
}

// WriteVars creates or replaces the variables as terraform.tfvars.json. Any
// terraform.tfvars written by Gardener's terraformer is dropped so only one applies.
func (o RunObjects) WriteVars(ctx context.Context, c client.Client, varsJSON []byte, opts ...WriteOption) error {
	if err := o.ID.Validate(); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: o.inputMeta(o.VarsName(), "vars")}
	err := writeObject(ctx, c, secret, func() error {
		controllerutil.AddFinalizer(secret, Finalizer)
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{VarsJSONKey: varsJSON}
		return nil
	}, opts...)
	if err != nil {
		return fmt.Errorf("writing Secret %s: %w", o.VarsName(), err)
	}
	return nil
}

// ReadState returns the stored state, reassembled and decoded; nil when there is none yet.
func (o RunObjects) ReadState(ctx context.Context, c client.Client) ([]byte, error) {
	return o.Store(c).Load(ctx)
}

// RestoreState stores a migrated state unless the stored state is a newer or the same
// snapshot of it (see Store.Restore); it reports whether it wrote.
func (o RunObjects) RestoreState(ctx context.Context, c client.Client, state []byte) (bool, error) {
	return o.Store(c).Restore(ctx, state)
}

// Store returns the store of this run's state.
func (o RunObjects) Store(c client.Client) *Store {
	return &Store{Client: c, Objects: o, Limit: defaultObjectLimit, MaxSize: o.MaxSize}
}

// ReadFiles reads the terraform files and the variables of a run, by file name. A run
// that owns them claims the two objects. The two are read side by side.
func (o RunObjects) ReadFiles(ctx context.Context, c client.Client, owned bool) (map[string][]byte, error) {
	var configFiles, varsFiles map[string][]byte
	read, ctx := errgroup.WithContext(ctx)
	read.Go(func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, o.key(o.ConfigName()), cm); err != nil {
			return fmt.Errorf("reading ConfigMap %s: %w", o.ConfigName(), err)
		}
		configFiles = map[string][]byte{}
		for name, content := range cm.Data {
			configFiles[name] = []byte(content)
		}
		for name, content := range cm.BinaryData {
			configFiles[name] = content
		}
		if owned {
			return claim(ctx, c, cm)
		}
		return nil
	})
	read.Go(func() error {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, o.key(o.VarsName()), secret); err != nil {
			return fmt.Errorf("reading Secret %s: %w", o.VarsName(), err)
		}
		varsFiles = map[string][]byte{}
		for _, key := range []string{VarsJSONKey, VarsHCLKey} {
			if v, ok := secret.Data[key]; ok {
				varsFiles[key] = v
			}
		}
		if owned {
			return claim(ctx, c, secret)
		}
		return nil
	})
	if err := read.Wait(); err != nil {
		return nil, err
	}
	maps.Copy(configFiles, varsFiles)
	return configFiles, nil
}

// ClaimVars claims the variables Secret for a run. A run pod may read it but not write it:
// one that finds it released (by a destroy that ended, its objects not yet deleted) could
// not claim it, so the executor does, with its own rights, before the pod starts.
func (o RunObjects) ClaimVars(ctx context.Context, c client.Client) error {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, o.key(o.VarsName()), secret); err != nil {
		return fmt.Errorf("reading Secret %s: %w", o.VarsName(), err)
	}
	return claim(ctx, c, secret)
}

// claim adds the run finalizer to obj, read just before, unless it carries it already.
func claim(ctx context.Context, c client.Client, obj client.Object) error {
	base := obj.DeepCopyObject().(client.Object)
	if !controllerutil.AddFinalizer(obj, Finalizer) {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("claiming %s: %w", obj.GetName(), err)
	}
	return nil
}

// objects returns the three run objects, empty but for their names.
func (o RunObjects) objects() []client.Object {
	return []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.ID.Namespace, Name: o.ConfigName()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.ID.Namespace, Name: o.VarsName()}},
		o.Storage.newObject(metav1.ObjectMeta{Namespace: o.ID.Namespace, Name: o.StateName()}).Object,
	}
}

// RemoveFinalizers releases the run objects.
func (o RunObjects) RemoveFinalizers(ctx context.Context, c client.Client) error {
	for _, obj := range o.objects() {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return fmt.Errorf("reading %s: %w", obj.GetName(), err)
		}
		base := obj.DeepCopyObject().(client.Object)
		if !controllerutil.RemoveFinalizer(obj, Finalizer) {
			continue
		}
		if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("updating the finalizers of %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// Delete releases and deletes everything a run keeps: the three run objects, the parts
// of a split state, the state history, the credentials Secret of a pod run, the stored credentials and the
// sensitive outputs.
// Objects already gone are skipped, so Delete may be repeated.
func (o RunObjects) Delete(ctx context.Context, c client.Client) error {
	if err := o.ID.Validate(); err != nil {
		return err
	}
	// A state is deleted in either kind of object: a move between the two may have been
	// cut short.
	other := o.Storage.Other().newObject(metav1.ObjectMeta{Namespace: o.ID.Namespace, Name: o.StateName()}).Object
	objects := append(o.objects(), other, o.secret(o.ID.EnvSecretName(), "env"), o.credentials(), o.sensitiveOutputs())
	for _, storage := range Storages {
		parts, err := storage.list(ctx, c, o.ID.Namespace, partOf(o.StateName()))
		if err != nil {
			return fmt.Errorf("listing state parts: %w", err)
		}
		for _, part := range parts {
			objects = append(objects, part.Object)
		}
	}
	for _, obj := range objects {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading %s: %w", obj.GetName(), err)
		}
		base := obj.DeepCopyObject().(client.Object)
		if controllerutil.RemoveFinalizer(obj, Finalizer) {
			if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("releasing %s: %w", obj.GetName(), err)
			}
		}
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

func (o RunObjects) secret(name, object string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: o.inputMeta(name, object)}
}

// writeOwnedSecret writes data into secret, an opaque Secret of the run controlled by
// owner; annotations, when set, replace its annotations.
func (o RunObjects) writeOwnedSecret(ctx context.Context, c client.Client, secret *corev1.Secret, owner client.Object, annotations map[string]string, data map[string][]byte, opts ...WriteOption) error {
	return writeObject(ctx, c, secret, func() error {
		secret.Labels = o.ID.Labels()
		if annotations != nil {
			secret.Annotations = annotations
		}
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = data
		return controllerutil.SetControllerReference(owner, secret, c.Scheme())
	}, opts...)
}

// credentials is the Secret keeping the credentials of the last run, so that a destroy
// can run after the Secret they came from is gone.
func (o RunObjects) credentials() *corev1.Secret {
	return o.secret(o.ID.CredentialsName(), "credentials")
}

// sensitiveOutputs is the Secret holding the outputs the configuration marks sensitive,
// which never reach a status.
func (o RunObjects) sensitiveOutputs() *corev1.Secret { return o.secret(o.ID.OutputsName(), "outputs") }

// ReadCredentials returns the stored credentials of the last run, or nil when none are stored.
func (o RunObjects) ReadCredentials(ctx context.Context, r client.Reader) (*corev1.Secret, error) {
	secret := o.credentials()
	if err := r.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the stored credentials: %w", err)
	}
	return secret, nil
}

// WriteCredentials stores the credentials of a run, env, with annotations, controlled by owner.
func (o RunObjects) WriteCredentials(ctx context.Context, c client.Client, owner client.Object, annotations, env map[string]string, opts ...WriteOption) error {
	data := make(map[string][]byte, len(env))
	for name, value := range env {
		data[name] = []byte(value)
	}
	if err := o.writeOwnedSecret(ctx, c, o.credentials(), owner, annotations, data, opts...); err != nil {
		return fmt.Errorf("storing the credentials of this run: %w", err)
	}
	return nil
}

// WriteSensitiveOutputs keeps the sensitive outputs, data, in their Secret controlled by
// owner; without any, it deletes the Secret.
func (o RunObjects) WriteSensitiveOutputs(ctx context.Context, c client.Client, owner client.Object, data map[string][]byte) error {
	secret := o.sensitiveOutputs()
	if len(data) == 0 {
		if err := c.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the Secret of sensitive outputs: %w", err)
		}
		return nil
	}
	if err := o.writeOwnedSecret(ctx, c, secret, owner, nil, data); err != nil {
		return fmt.Errorf("writing the Secret of sensitive outputs: %w", err)
	}
	return nil
}
