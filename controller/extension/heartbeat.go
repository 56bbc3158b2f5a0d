package extension

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HeartbeatLeaseName is the Lease gardenlet reads to tell that an extension is alive.
const HeartbeatLeaseName = "gardener-extension-heartbeat"

// defaultHeartbeatInterval is how often the Lease is renewed, as Gardener's extensions do.
const defaultHeartbeatInterval = 30 * time.Second

// Heartbeat renews the heartbeat Lease in the extension's namespace while this replica leads.
type Heartbeat struct {
	Client client.Client
	// Namespace is the extension's own namespace.
	Namespace string
	// Holder names the extension in the Lease.
	Holder   string
	Interval time.Duration
	Now      func() time.Time
}

// NeedLeaderElection makes only the leader renew: gardenlet asks whether the extension
// reconciles, not whether a replica runs.
func (h *Heartbeat) NeedLeaderElection() bool { return true }

// Start renews the Lease at once and then every Interval until ctx ends. A failed renewal
// is logged and tried again at the next tick: gardenlet tolerates a missed beat.
func (h *Heartbeat) Start(ctx context.Context) error {
	interval := h.Interval
	if interval <= 0 {
		interval = defaultHeartbeatInterval
	}
	log := ctrl.LoggerFrom(ctx).WithValues("lease", HeartbeatLeaseName, "namespace", h.Namespace)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := h.renew(ctx, interval); err != nil && ctx.Err() == nil {
			log.Error(err, "renewingHeartbeat")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (h *Heartbeat) renew(ctx context.Context, interval time.Duration) error {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	renewTime := metav1.NewMicroTime(now())
	seconds := int32(interval / time.Second)
	lease := &coordinationv1.Lease{}
	err := h.Client.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: HeartbeatLeaseName}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: HeartbeatLeaseName},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: &h.Holder, LeaseDurationSeconds: &seconds, RenewTime: &renewTime,
			},
		}
		return h.Client.Create(ctx, lease)
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity = &h.Holder
	lease.Spec.LeaseDurationSeconds = &seconds
	lease.Spec.RenewTime = &renewTime
	return h.Client.Update(ctx, lease)
}
