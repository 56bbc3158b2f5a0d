package templates

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates/engine"
)

// KindObject is an object of a kind that renders from templates: a BackupBucket,
// BackupEntry, DNSRecord, Bastion or SelfHostedShootExposure.
type KindObject interface {
	runtime.Object
	metav1.Object
	GetExtensionSpec() *extensionsv1alpha1.DefaultSpec
	GetSecretRef() corev1.SecretReference
}

// KindInput is what a kind renders from.
type KindInput struct {
	// Object is the kind's object, of the kind that renders it.
	Object KindObject
	// Cluster may be nil: a BackupBucket or BackupEntry has none.
	Cluster *extensionsv1alpha1.Cluster
	// WorkloadIdentity renders for the provider's workloadIdentity credentials.
	WorkloadIdentity bool
}

// kindObject reads the fields templates see of a kind's object: its name and namespace,
// its spec as JSON has it, and the status fields a later operation builds on (a
// DNSRecord's zone, once found). It fails on an object of another kind.
func kindObject(kind Kind, obj runtime.Object) (map[string]any, *extensionsv1alpha1.DefaultSpec, error) {
	var (
		meta   map[string]any
		spec   any
		status = map[string]any{}
		common *extensionsv1alpha1.DefaultSpec
	)
	switch o := obj.(type) {
	case *extensionsv1alpha1.BackupBucket:
		if kind == KindBackupBucket {
			meta, spec, common = map[string]any{"name": o.Name}, o.Spec, &o.Spec.DefaultSpec
		}
	case *extensionsv1alpha1.BackupEntry:
		if kind == KindBackupEntry {
			meta, spec, common = map[string]any{"name": o.Name}, o.Spec, &o.Spec.DefaultSpec
		}
	case *extensionsv1alpha1.DNSRecord:
		if kind == KindDNSRecord {
			meta, spec, common = map[string]any{"name": o.Name, "namespace": o.Namespace}, o.Spec, &o.Spec.DefaultSpec
			// Gardener says by annotation which IP stack a record serves (dns.gardener.cloud/ip-stack).
			annotations := map[string]any{}
			for key, value := range o.Annotations {
				annotations[key] = value
			}
			meta["annotations"] = annotations
			if o.Status.Zone != nil {
				status["zone"] = *o.Status.Zone
			}
		}
	case *extensionsv1alpha1.Bastion:
		if kind == KindBastion {
			meta, spec, common = map[string]any{"name": o.Name, "namespace": o.Namespace}, o.Spec, &o.Spec.DefaultSpec
		}
	case *extensionsv1alpha1.SelfHostedShootExposure:
		if kind == kindSelfHostedShootExposure {
			meta, spec, common = map[string]any{"name": o.Name, "namespace": o.Namespace}, o.Spec, &o.Spec.DefaultSpec
		}
	}
	if meta == nil {
		return nil, nil, fmt.Errorf("a %s renders from its own object, not a %T", kind, obj)
	}
	if o, ok := obj.(metav1.Object); ok {
		meta["uid"] = string(o.GetUID())
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	var decoded map[string]any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return nil, nil, err
	}
	return map[string]any{"metadata": meta, "spec": decoded, "status": status}, common, nil
}

// Render validates a kind's object and renders the kind's terraform files and tfvars.
// Templates see .object (metadata.name, namespace and uid, spec, and status.zone of a
// DNSRecord that has one), .kind, .cluster, .credentials and .workloadIdentity.
func (k *KindProvider) Render(in KindInput) (*Rendered, error) {
	data, credentials, err := k.data(in)
	if err != nil {
		return nil, err
	}
	return k.render(data, credentials, &renderState{vars: map[string]any{}})
}

// RenderUnvalidated renders without the checks, with the templates' own `invalid`
// checks passing: it exists to prove that templates are safe on any input.
func (k *KindProvider) RenderUnvalidated(in KindInput) (*Rendered, error) {
	object, _, err := kindObject(k.Kind, in.Object)
	if err != nil {
		return nil, err
	}
	data, credentials, err := k.templateData(object, in)
	if err != nil {
		return nil, err
	}
	return k.render(data, credentials, &renderState{vars: map[string]any{}, unvalidated: true})
}

// Validate checks a kind's object without rendering it.
func (k *KindProvider) Validate(in KindInput) error {
	_, _, err := k.data(in)
	return err
}

func (k *KindProvider) data(in KindInput) (map[string]any, []Credential, error) {
	object, common, err := kindObject(k.Kind, in.Object)
	if err != nil {
		return nil, nil, err
	}
	errs := checkKindObject(in.Object)
	if !slices.Contains(k.Types(), common.Type) {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "type"), common.Type, k.Types()))
	}
	if len(errs) == 0 && k.schema != nil {
		config, invalid := engine.DecodeObject(field.NewPath("providerConfig"), common.ProviderConfig)
		if invalid != nil {
			errs = append(errs, invalid)
		} else {
			if config == nil {
				config = map[string]any{}
			}
			errs = append(errs, schemaErrors(k.schema.Validate(config), config)...)
		}
	}
	if len(errs) > 0 {
		return nil, nil, &ValidationError{Type: k.Type, Object: string(k.Kind), Errors: errs}
	}
	return k.templateData(object, in)
}

// templateData is what the kind's templates run on, and the credentials they reach.
func (k *KindProvider) templateData(object map[string]any, in KindInput) (map[string]any, []Credential, error) {
	cluster, invalid := engine.DecodeCluster(in.Cluster)
	if invalid != nil {
		return nil, nil, &ValidationError{Type: k.Type, Object: string(k.Kind), Errors: field.ErrorList{invalid}}
	}
	credentials, err := k.credentialSet().declared(in.WorkloadIdentity)
	if err != nil {
		return nil, nil, err
	}
	return map[string]any{
		"object":           object,
		"kind":             string(k.Kind),
		"cluster":          cluster,
		"credentials":      credentialReferences(credentials),
		"workloadIdentity": in.WorkloadIdentity,
	}, credentials, nil
}

func (k *KindProvider) render(data map[string]any, credentials []Credential, state *renderState) (*Rendered, error) {
	rendered, err := renderTerraform(terraformSet{providerType: k.Type, kind: k.Kind, templates: k.templates, helpers: k.helpers}, data, credentials, state)
	if err != nil {
		return nil, err
	}
	if rendered.Purge, err = k.renderPurge(data, credentials); err != nil {
		return nil, err
	}
	return rendered, nil
}

// checkKindObject checks what Gardener's own validation of the kind checks, naming each
// field: the templates can then rely on it.
func checkKindObject(obj KindObject) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch obj.(type) {
	case *extensionsv1alpha1.Bastion, *extensionsv1alpha1.SelfHostedShootExposure:
		// Their credentials are the shoot's, by a name of their own (GetSecretRef).
	default:
		if obj.GetSecretRef().Name == "" {
			errs = append(errs, field.Required(spec.Child("secretRef", "name"), "the credentials secret"))
		}
	}
	switch o := obj.(type) {
	case *extensionsv1alpha1.BackupBucket:
		if o.Spec.Region == "" {
			errs = append(errs, field.Required(spec.Child("region"), ""))
		}
	case *extensionsv1alpha1.BackupEntry:
		if o.Spec.BucketName == "" {
			errs = append(errs, field.Required(spec.Child("bucketName"), ""))
		}
	case *extensionsv1alpha1.DNSRecord:
		errs = append(errs, checkDNSRecord(o)...)
	case *extensionsv1alpha1.SelfHostedShootExposure:
		errs = append(errs, checkExposure(o)...)
	case *extensionsv1alpha1.Bastion:
		if len(o.Spec.UserData) == 0 {
			errs = append(errs, field.Required(spec.Child("userData"), "the bastion's user data sets up its SSH keys"))
		}
		if len(o.Spec.Ingress) == 0 {
			errs = append(errs, field.Required(spec.Child("ingress"), "name at least one address block SSH is allowed from"))
		}
		for i, in := range o.Spec.Ingress {
			p := spec.Child("ingress").Index(i).Child("ipBlock")
			if prefix, err := netip.ParsePrefix(in.IPBlock.CIDR); err != nil || prefix.Masked() != prefix {
				errs = append(errs, field.Invalid(p.Child("cidr"), in.IPBlock.CIDR, "must be a CIDR without host bits"))
			}
			for j, except := range in.IPBlock.Except {
				if _, err := netip.ParsePrefix(except); err != nil {
					errs = append(errs, field.Invalid(p.Child("except").Index(j), except, "must be a CIDR"))
				}
			}
		}
	}
	return errs
}

func checkDNSRecord(r *extensionsv1alpha1.DNSRecord) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if !domainName(r.Spec.Name, true) {
		errs = append(errs, field.Invalid(spec.Child("name"), r.Spec.Name, "must be a domain name, optionally starting with a wildcard label (*.)"))
	}
	types := []string{string(extensionsv1alpha1.DNSRecordTypeA), string(extensionsv1alpha1.DNSRecordTypeAAAA), string(extensionsv1alpha1.DNSRecordTypeCNAME), string(extensionsv1alpha1.DNSRecordTypeTXT)}
	if !slices.Contains(types, string(r.Spec.RecordType)) {
		errs = append(errs, field.NotSupported(spec.Child("recordType"), r.Spec.RecordType, types))
	}
	if len(r.Spec.Values) == 0 {
		errs = append(errs, field.Required(spec.Child("values"), ""))
	}
	if r.Spec.RecordType == extensionsv1alpha1.DNSRecordTypeCNAME && len(r.Spec.Values) > 1 {
		errs = append(errs, field.Invalid(spec.Child("values"), r.Spec.Values, "a CNAME record has one value"))
	}
	for i, v := range r.Spec.Values {
		addr, err := netip.ParseAddr(v)
		switch r.Spec.RecordType {
		case extensionsv1alpha1.DNSRecordTypeA:
			if err != nil || !addr.Is4() {
				errs = append(errs, field.Invalid(spec.Child("values").Index(i), v, "must be an IPv4 address"))
			}
		case extensionsv1alpha1.DNSRecordTypeAAAA:
			if err != nil || !addr.Is6() || addr.Is4In6() {
				errs = append(errs, field.Invalid(spec.Child("values").Index(i), v, "must be an IPv6 address"))
			}
		case extensionsv1alpha1.DNSRecordTypeCNAME:
			if !domainName(v, false) {
				errs = append(errs, field.Invalid(spec.Child("values").Index(i), v, "must be a domain name"))
			}
		}
	}
	if r.Spec.TTL != nil && (*r.Spec.TTL < 1 || *r.Spec.TTL > 2147483647) {
		errs = append(errs, field.Invalid(spec.Child("ttl"), *r.Spec.TTL, "must be between 1 and 2147483647 seconds"))
	}
	if r.Spec.Zone != nil && *r.Spec.Zone == "" {
		errs = append(errs, field.Invalid(spec.Child("zone"), "", "must not be empty when set"))
	}
	return errs
}

// checkExposure checks what Gardener's validation of a SelfHostedShootExposure checks
// and the templates build on: a port, at least one endpoint, and every address of a type
// Gardener knows, an IP address where its type says so.
func checkExposure(e *extensionsv1alpha1.SelfHostedShootExposure) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if ref := e.Spec.CredentialsRef; ref != nil {
		p := spec.Child("credentialsRef")
		if ref.APIVersion != "v1" || ref.Kind != "Secret" {
			errs = append(errs, field.NotSupported(p, ref.APIVersion+", Kind="+ref.Kind, []string{"v1, Kind=Secret"}))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the credentials secret"))
		}
		if ref.Namespace != e.Namespace {
			errs = append(errs, field.Invalid(p.Child("namespace"), ref.Namespace, "must equal metadata.namespace"))
		}
	}
	if e.Spec.Port < 1 || e.Spec.Port > 65535 {
		errs = append(errs, field.Invalid(spec.Child("port"), e.Spec.Port, "must be between 1 and 65535"))
	}
	if len(e.Spec.Endpoints) == 0 {
		errs = append(errs, field.Required(spec.Child("endpoints"), "name at least one control-plane node"))
	}
	types := []string{string(corev1.NodeHostName), string(corev1.NodeInternalIP), string(corev1.NodeExternalIP), string(corev1.NodeInternalDNS), string(corev1.NodeExternalDNS)}
	for i, endpoint := range e.Spec.Endpoints {
		p := spec.Child("endpoints").Index(i)
		if endpoint.NodeName == "" {
			errs = append(errs, field.Required(p.Child("nodeName"), ""))
		}
		for j, address := range endpoint.Addresses {
			a := p.Child("addresses").Index(j)
			switch address.Type {
			case corev1.NodeInternalIP, corev1.NodeExternalIP:
				if _, err := netip.ParseAddr(address.Address); err != nil {
					errs = append(errs, field.Invalid(a.Child("address"), address.Address, "must be an IP address"))
				}
			case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
				if !domainName(address.Address, false) {
					errs = append(errs, field.Invalid(a.Child("address"), address.Address, "must be a domain name"))
				}
			default:
				errs = append(errs, field.NotSupported(a.Child("type"), address.Type, types))
			}
		}
	}
	return errs
}

// dnsLabel is one label of a domain name as DNS providers take them: letters, digits,
// hyphens inside, and underscores (_acme-challenge).
var dnsLabel = regexp.MustCompile(`^[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?$`)

// domainName says whether name is a domain name of at most 253 characters, with or
// without the root's dot, starting with the wildcard label "*" where wildcard allows it.
func domainName(name string, wildcard bool) bool {
	name = strings.TrimSuffix(name, ".")
	if wildcard {
		name = strings.TrimPrefix(name, "*.")
	}
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if !dnsLabel.MatchString(label) {
			return false
		}
	}
	return true
}

func (k *KindProvider) credentialSet() credentialSet {
	s := k.provider.credentialSet()
	if len(k.Manifest.Credentials) > 0 {
		s.static = k.Manifest.Credentials
	}
	return s
}

// OperatorOnlyCredentials is Provider.OperatorOnlyCredentials for the kind's credentials.
func (k *KindProvider) OperatorOnlyCredentials(secret *corev1.Secret) []string {
	return k.credentialSet().operatorOnly(secret)
}

// Credentials is Provider.Credentials for the kind's credentials.
func (k *KindProvider) Credentials(secret *corev1.Secret) (map[string]string, error) {
	return k.credentialSet().environment(secret)
}

// CredentialFiles is Provider.CredentialFiles for the kind's credentials.
func (k *KindProvider) CredentialFiles(secret *corev1.Secret) map[string]string {
	return k.credentialSet().files(secret)
}

// KindStatus is what a kind reports from terraform's outputs.
type KindStatus struct {
	// ProviderStatus is nil when the kind declares none.
	ProviderStatus *runtime.RawExtension
	// Fields are the kind's own status fields by their path (zone, ingress.ip).
	Fields map[string]string
	// GeneratedSecret is the data of a BackupBucket's generated Secret.
	GeneratedSecret map[string][]byte
}

// Status maps terraform outputs (JSON-typed values) into the status the kind declares.
func (k *KindProvider) Status(outputs map[string]any) (*KindStatus, error) {
	mapping := k.Manifest.Status
	out := &KindStatus{Fields: map[string]string{}}
	if mapping.ProviderStatus != nil {
		var err error
		if out.ProviderStatus, err = providerStatus(k.Type, *mapping.ProviderStatus, outputs); err != nil {
			return nil, err
		}
	}
	for _, f := range slices.Sorted(maps.Keys(mapping.Fields)) {
		value, err := stringOutput(k.Type, mapping.Fields[f], outputs)
		if err != nil {
			return nil, err
		}
		if value != "" {
			out.Fields[f] = value
		}
	}
	if len(mapping.GeneratedSecret) > 0 {
		out.GeneratedSecret = map[string][]byte{}
		for _, key := range slices.Sorted(maps.Keys(mapping.GeneratedSecret)) {
			value, err := stringOutput(k.Type, mapping.GeneratedSecret[key], outputs)
			if err != nil {
				return nil, err
			}
			out.GeneratedSecret[key] = []byte(value)
		}
	}
	return out, nil
}

func stringOutput(providerType, name string, outputs map[string]any) (string, error) {
	value, ok := outputs[name]
	if !ok {
		return "", &OutputError{Type: providerType, Output: name, Reason: "is missing"}
	}
	switch v := value.(type) {
	case string:
		return v, nil
	case nil:
		return "", nil
	default:
		return "", &OutputError{Type: providerType, Output: name, Reason: fmt.Sprintf("must be a string, got %T", v)}
	}
}

// DeclaredCredentials are the credentials the kind reads from a secret of static keys, or
// from a workload identity's; nil when the provider declares none for that.
func (k *KindProvider) DeclaredCredentials(workloadIdentity bool) []Credential {
	credentials, _ := k.credentialSet().declared(workloadIdentity)
	return credentials
}
