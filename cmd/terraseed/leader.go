package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/terraseed/terraseed/terraform/executor"
)

// leaderElectionID is the Lease's name. It keeps the name it had before the binary was
// renamed: replicas of the version before and after an upgrade must contend for the
// same one.
const leaderElectionID = "terraseed-infrastructure-controller"

// leaderRenewDeadline is controller-runtime's default renew deadline, which the lock's
// client timeout is derived from.
const leaderRenewDeadline = 10 * time.Second

// leaderLock is the leader election's Lease lock as controller-runtime builds it, wrapped
// so that a replica taking the lease over from one that lost it holds its local runs back
// until the other's could have stopped and saved (executor.HoldAfterTakeover).
func (o managerOptions) leaderLock(cfg *rest.Config, bound time.Duration, hold func(time.Time)) (resourcelock.Interface, error) {
	lock, err := leaderelection.NewResourceLock(rest.CopyConfig(cfg), noLeaderEvents{}, leaderelection.Options{
		LeaderElection:          true,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: o.leaderElectionNamespace,
		RenewDeadline:           leaderRenewDeadline,
	})
	if err != nil {
		return nil, fmt.Errorf("the leader election's lock (--leader-election-namespace must be set outside a pod): %w", err)
	}
	return executor.HoldAfterTakeover(lock, bound, hold), nil
}

// noLeaderEvents records no event of the leader election: the lock is built before the
// manager whose recorders it would take, and the log says who leads.
type noLeaderEvents struct{}

func (noLeaderEvents) GetEventRecorderFor(string) record.EventRecorder { return nil }

func (noLeaderEvents) GetEventRecorder(string) recorder.EventRecorder { return nil }

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
