package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/terraseed/terraseed/terraform/executor"
)

// leaderElectionID is the Lease's name. It keeps the name it had before the binary was
// renamed: replicas of the version before and after an upgrade must contend for the
// same one.
const leaderElectionID = "terraseed-infrastructure-controller"

// inClusterNamespace is where a pod finds its namespace, the Lease's by default.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaderRenewDeadline is controller-runtime's default renew deadline, which the lock's
// client timeout is derived from as controller-runtime derives it.
const leaderRenewDeadline = 10 * time.Second

// leaderLock is the leader election's Lease lock, built as controller-runtime builds it,
// wrapped so that a replica taking the lease over from one that lost it holds its local
// runs back until the other's could have stopped and saved (executor.HoldAfterTakeover).
func (o managerOptions) leaderLock(cfg *rest.Config, bound time.Duration, hold func(time.Time)) (resourcelock.Interface, error) {
	namespace := o.leaderElectionNamespace
	if namespace == "" {
		inPod, err := os.ReadFile(inClusterNamespace)
		if err != nil {
			return nil, fmt.Errorf("--leader-election-namespace: must be set outside a pod: %w", err)
		}
		namespace = strings.TrimSpace(string(inPod))
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// A single hung request must not cost the lease.
	cfg.Timeout = leaderRenewDeadline / 2
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, leaderElectionID, core, coordination,
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, err
	}
	return executor.HoldAfterTakeover(lock, bound, hold), nil
}

// drainingManager is the manager whose Start returns only once the local runs have
// stopped and saved their state (executor.StartAndDrain), a lost lease included.
type drainingManager struct {
	manager.Manager
	runs  *executor.LocalExecutor
	bound time.Duration
}

func (m *drainingManager) Start(ctx context.Context) error {
	return executor.StartAndDrain(ctx, m.Manager, m.runs, m.bound)
}
