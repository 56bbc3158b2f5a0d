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
