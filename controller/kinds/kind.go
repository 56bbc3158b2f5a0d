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

// The kinds served: the Infrastructure, and each kind a provider may serve from templates.
var (
	infrastructureKind = &kindSpec{
		name: "Infrastructure", purpose: run.PurposeInfra, finalizer: Finalizer, driftChecked: true, objectMetrics: true,
		newObject: func() Subject { return &extensionsv1alpha1.Infrastructure{} },
		newList:   func() client.ObjectList { return &extensionsv1alpha1.InfrastructureList{} },
		serve: func(providers *templates.Registry, obj Subject) (served, error) {
			provider, err := providers.Provider(obj.GetExtensionSpec().Type)
			if err != nil {
				return nil, err
			}
			return servedInfrastructure{provider}, nil
		},
	}
	backupBucketKind = templateKind("BackupBucket", templates.KindBackupBucket, true,
		func() Subject { return &extensionsv1alpha1.BackupBucket{} }, func() client.ObjectList { return &extensionsv1alpha1.BackupBucketList{} })
	backupEntryKind = templateKind("BackupEntry", templates.KindBackupEntry, true,
		func() Subject { return &extensionsv1alpha1.BackupEntry{} }, func() client.ObjectList { return &extensionsv1alpha1.BackupEntryList{} })
	dnsRecordKind = urgentKind(templateKind("DNSRecord", templates.KindDNSRecord, false,
		func() Subject { return &extensionsv1alpha1.DNSRecord{} }, func() client.ObjectList { return &extensionsv1alpha1.DNSRecordList{} }))
	bastionKind = templateKind("Bastion", templates.KindBastion, false,
		func() Subject { return &extensionsv1alpha1.Bastion{} }, func() client.ObjectList { return &extensionsv1alpha1.BastionList{} })
	exposureKind = templateKind("SelfHostedShootExposure", templates.Kind("selfhostedshootexposure"), false,
		func() Subject { return &extensionsv1alpha1.SelfHostedShootExposure{} },
		func() client.ObjectList { return &extensionsv1alpha1.SelfHostedShootExposureList{} })

	kindsByPurpose = map[run.Purpose]*kindSpec{}
)

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

// servedInfrastructure is the provider's Infrastructure.
type servedInfrastructure struct{ *templates.Provider }

func (p servedInfrastructure) render(obj Subject, cluster *extensionsv1alpha1.Cluster, workloadIdentity bool) (*templates.Rendered, error) {
	return p.Render(templates.Input{Infrastructure: obj.(*extensionsv1alpha1.Infrastructure), Cluster: cluster, WorkloadIdentity: workloadIdentity})
}

func (p servedInfrastructure) protectedResources() []string { return p.Manifest.ProtectedResources }
func (p servedInfrastructure) statusOutputs() []string      { return p.Manifest.Status.Outputs() }
func (p servedInfrastructure) fleet() *templates.Provider   { return p.Provider }

// check has nothing to refuse before the apply: a local namespace that another object
// owns is refused by the cluster itself (see "local.owner" in templates/local).
func (p servedInfrastructure) check(context.Context, *operation) error { return nil }

func (p servedInfrastructure) report(outputs map[string]any) (report, error) {
	status, err := p.Status(outputs)
	if err != nil {
		return nil, err
	}
	return func(_ context.Context, op *operation) error {
		infra := op.obj.(*extensionsv1alpha1.Infrastructure)
		infra.Status.ProviderStatus = status.ProviderStatus
		infra.Status.NodesCIDR = status.NodesCIDR
		infra.Status.EgressCIDRs = status.EgressCIDRs
		return nil
	}, nil
}

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
