package v1alpha1

import corev1 "k8s.io/api/core/v1"

// The accessors below let one reconciler serve every extension kind through the parts
// their specs and statuses share.

// GetExtensionSpec returns the spec fields every extension kind shares.
func (i *Infrastructure) GetExtensionSpec() *DefaultSpec { return &i.Spec.DefaultSpec }

// GetExtensionStatus returns the status fields every extension kind shares.
func (i *Infrastructure) GetExtensionStatus() *DefaultStatus { return &i.Status.DefaultStatus }

// GetExtensionSpec returns the spec fields every extension kind shares.
func (c *ControlPlane) GetExtensionSpec() *DefaultSpec { return &c.Spec.DefaultSpec }

// GetExtensionStatus returns the status fields every extension kind shares.
func (c *ControlPlane) GetExtensionStatus() *DefaultStatus { return &c.Status.DefaultStatus }

// GetExtensionSpec returns the spec fields every extension kind shares.
func (b *BackupBucket) GetExtensionSpec() *DefaultSpec { return &b.Spec.DefaultSpec }

// GetExtensionStatus returns the status fields every extension kind shares.
func (b *BackupBucket) GetExtensionStatus() *DefaultStatus { return &b.Status.DefaultStatus }

// GetExtensionSpec returns the spec fields every extension kind shares.
func (e *BackupEntry) GetExtensionSpec() *DefaultSpec { return &e.Spec.DefaultSpec }

// GetExtensionStatus returns the status fields every extension kind shares.
func (e *BackupEntry) GetExtensionStatus() *DefaultStatus { return &e.Status.DefaultStatus }

// GetExtensionSpec returns the spec fields every extension kind shares.
func (r *DNSRecord) GetExtensionSpec() *DefaultSpec { return &r.Spec.DefaultSpec }

// GetExtensionStatus returns the status fields every extension kind shares.
func (r *DNSRecord) GetExtensionStatus() *DefaultStatus { return &r.Status.DefaultStatus }

// GetExtensionSpec returns the spec fields every extension kind shares.
func (b *Bastion) GetExtensionSpec() *DefaultSpec { return &b.Spec.DefaultSpec }

// GetExtensionStatus returns the status fields every extension kind shares.
func (b *Bastion) GetExtensionStatus() *DefaultStatus { return &b.Status.DefaultStatus }

// GetExtensionSpec returns the spec fields every extension kind shares.
func (e *SelfHostedShootExposure) GetExtensionSpec() *DefaultSpec { return &e.Spec.DefaultSpec }

// GetExtensionStatus returns the status fields every extension kind shares.
func (e *SelfHostedShootExposure) GetExtensionStatus() *DefaultStatus { return &e.Status.DefaultStatus }

// BastionSecretName is the Secret in a Bastion's namespace that holds the shoot's cloud
// credentials: a Bastion names none, it uses the shoot's, as Gardener's providers do.
const BastionSecretName = "cloudprovider"

// GetSecretRef returns the reference to the provider credentials.
func (i *Infrastructure) GetSecretRef() corev1.SecretReference { return i.Spec.SecretRef }

// GetSecretRef returns the reference to the provider credentials.
func (b *BackupBucket) GetSecretRef() corev1.SecretReference { return b.Spec.SecretRef }

// GetSecretRef returns the reference to the provider credentials.
func (e *BackupEntry) GetSecretRef() corev1.SecretReference { return e.Spec.SecretRef }

// GetSecretRef returns the reference to the provider credentials.
func (r *DNSRecord) GetSecretRef() corev1.SecretReference { return r.Spec.SecretRef }

// GetSecretRef returns the reference to the shoot's cloud credentials in the Bastion's
// namespace.
func (b *Bastion) GetSecretRef() corev1.SecretReference {
	return corev1.SecretReference{Name: BastionSecretName, Namespace: b.Namespace}
}

// GetSecretRef returns the reference to the cloud credentials: spec.credentialsRef, which
// gardenlet sets for a shoot with managed infrastructure, else the Secret cloudprovider
// in the exposure's namespace, which the operator of a shoot with unmanaged
// infrastructure provides, as for a Bastion.
func (e *SelfHostedShootExposure) GetSecretRef() corev1.SecretReference {
	if ref := e.Spec.CredentialsRef; ref != nil {
		return corev1.SecretReference{Name: ref.Name, Namespace: ref.Namespace}
	}
	return corev1.SecretReference{Name: BastionSecretName, Namespace: e.Namespace}
}
