package v1alpha1

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
