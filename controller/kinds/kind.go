package kinds

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
)

// Subject is an object the actuator makes exist with terraform: an Infrastructure, or an
// object of another kind its provider renders from templates (templates.Kinds).
type Subject interface {
	extension.Object
	// GetSecretRef names the Secret of the cloud credentials the runs use.
	GetSecretRef() corev1.SecretReference
}

// kindSpec is what the operations need to know of the objects of one kind; what they do
// is the same for every kind.
type kindSpec struct {
	// name is the kind as the API names it.
	name string
	// purpose tells its runs from those of another kind of object of the same name.
	purpose run.Purpose
	// clusterScoped objects keep their runs in the controller's namespace (Actuator.Namespace).
	clusterScoped bool
	// driftChecked objects are planned against their configuration between applies
	// (Verify), and carry the condition InSync.
	driftChecked bool
	// objectMetrics are the gauges kept per object (metrics.go), the Infrastructure's only:
	// a seed holds few objects of the other kinds per shoot, and their runs are counted.
	objectMetrics bool
	finalizer     string
	newObject     func() Subject
	newList       func() client.ObjectList
	// serve returns what the provider of obj serves for it.
	serve func(providers *templates.Registry, obj Subject) (served, error)
	// urgent objects' runs start before the other kinds' that wait for a slot: gardenlet
	// waits for a DNSRecord at most two minutes, and its runs are short.
	urgent bool
}

func (k *kindSpec) gvk() schema.GroupVersionKind {
	return extensionsv1alpha1.GroupVersion.WithKind(k.name)
}

// kindsByPurpose are the kinds served, each declared in a file of its own
// (infrastructure.go, backupbucket.go, backupentry.go, dnsrecord.go, bastion.go,
// selfhostedshootexposure.go), by the purpose of their runs.
var kindsByPurpose = map[run.Purpose]*kindSpec{}

func init() {
	for _, k := range []*kindSpec{infrastructureKind, backupBucketKind, backupEntryKind, dnsRecordKind, bastionKind, exposureKind} {
		kindsByPurpose[k.purpose] = k
	}
}

// templateKind is a kind its provider serves from the directory templates/<type>/<kind>/;
// its finalizer is the one Gardener's extensions put on it.
func templateKind(name string, kind templates.Kind, clusterScoped bool, newObject func() Subject, newList func() client.ObjectList) *kindSpec {
	return &kindSpec{
		name: name, purpose: run.Purpose(kind), clusterScoped: clusterScoped,
		finalizer: "extensions.gardener.cloud/" + string(kind),
		newObject: newObject, newList: newList,
		serve: func(providers *templates.Registry, obj Subject) (served, error) {
			provider, err := providers.Kind(kind, obj.GetExtensionSpec().Type)
			if err != nil {
				return nil, err
			}
			return servedKind{provider}, nil
		},
	}
}

// urgentKind is k, whose runs are urgent.
func urgentKind(k *kindSpec) *kindSpec {
	k.urgent = true
	return k
}

// served is what a provider serves for one object: its configuration, how its credentials
// read, and how the outputs of an apply become its status.
type served interface {
	render(obj Subject, cluster *extensionsv1alpha1.Cluster, workloadIdentity bool) (*templates.Rendered, error)
	Credentials(secret *corev1.Secret) (map[string]string, error)
	CredentialFiles(secret *corev1.Secret) map[string]string
	OperatorOnlyCredentials(secret *corev1.Secret) []string
	ImportIDs() *imports.IDs
	ImportIDForms() *imports.Forms
	OwnedNamespaces() *templates.OwnedNamespaces
	ImportIDsFile() string
	protectedResources() []string
	// statusOutputs are the outputs the status reads, which may not be sensitive.
	statusOutputs() []string
	// fleet is the provider whose account, throttling and parallelism the runs of every
	// kind it serves share.
	fleet() *templates.Provider
	// check refuses an input the templates cannot tell is wrong.
	check(ctx context.Context, op *operation) error
	// report maps the outputs of an apply into what the apply reports; it fails before
	// anything is written when an output is missing or of the wrong type.
	report(outputs map[string]any) (report, error)
}

// report writes what an apply reports into the object's status (and a BackupBucket's
// generated Secret).
type report func(ctx context.Context, op *operation) error

// servedKind is a kind the provider serves from its own directory.
type servedKind struct{ *templates.KindProvider }

func (k servedKind) render(obj Subject, cluster *extensionsv1alpha1.Cluster, workloadIdentity bool) (*templates.Rendered, error) {
	return k.Render(templates.KindInput{Object: obj, Cluster: cluster, WorkloadIdentity: workloadIdentity})
}

func (k servedKind) protectedResources() []string            { return k.Manifest.ProtectedResources }
func (k servedKind) statusOutputs() []string                 { return k.Manifest.Status.StatusOutputs() }
func (k servedKind) fleet() *templates.Provider              { return k.Provider() }
func (k servedKind) check(context.Context, *operation) error { return nil }
func (k servedKind) report(outputs map[string]any) (report, error) {
	status, err := k.Status(outputs)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, op *operation) error {
		op.status().ProviderStatus = status.ProviderStatus
		return op.reportKindStatus(ctx, status)
	}, nil
}

// reportKindStatus sets the status fields of a kind besides its providerStatus from what
// its outputs gave, each kind in its own file, and writes a BackupBucket's generated
// Secret before its status names it.
func (op *operation) reportKindStatus(ctx context.Context, status *templates.KindStatus) error {
	switch obj := op.obj.(type) {
	case *extensionsv1alpha1.DNSRecord:
		reportDNSRecordStatus(obj, status)
	case *extensionsv1alpha1.Bastion:
		reportBastionStatus(obj, status)
	case *extensionsv1alpha1.SelfHostedShootExposure:
		reportExposureStatus(obj, status)
	case *extensionsv1alpha1.BackupBucket:
		return op.reportGeneratedSecret(ctx, obj, status)
	}
	return nil
}

// unknownType says whether err is that no provider serves the object's spec.type.
func unknownType(err error) bool {
	return errors.As(err, new(*templates.UnknownProviderError)) || errors.As(err, new(*templates.UnknownKindTypeError))
}

// listItems returns the objects of a list of a kind.
func listItems(list client.ObjectList) []Subject {
	objects, _ := meta.ExtractList(list)
	items := make([]Subject, 0, len(objects))
	for _, o := range objects {
		if s, ok := o.(Subject); ok {
			items = append(items, s)
		}
	}
	return items
}
