package kinds

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
)

// checkedAt is an Infrastructure whose last drift check was at the given time.
func checkedAt(i int, last time.Time) *extensionsv1alpha1.Infrastructure {
	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprintf("6c1a3e5e-%04d-4f3b-9a57-0c2d1e6f%04d", i, i))}}
	extension.SetCondition(&infra.Status.DefaultStatus, extensionsv1alpha1.Condition{Type: ConditionInSync, Status: extensionsv1alpha1.ConditionTrue, LastUpdateTime: metav1.NewTime(last)})
	return infra
}

// TestDriftChecksSpreadOverTheIntervalAndComeDue: after a start that finds every check
// overdue, the checks spread over the next interval instead of all running at once, and
// each one is due when its wake-up comes, also a little late.
func TestDriftChecksSpreadOverTheIntervalAndComeDue(t *testing.T) {
	g := NewWithT(t)
	const interval = time.Hour
	a := &Actuator{DriftInterval: interval}
	now := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	buckets := make([]int, 10)
	for i := range 1000 {
		infra := checkedAt(i, now.Add(-5*interval))
		next := a.nextDriftCheck(infra, now)
		g.Expect(next).To(BeTemporally(">", now.Add(-driftLateness(interval))), "no check of an overdue object runs much earlier than its point")
		g.Expect(next).To(BeTemporally("<=", now.Add(interval)))
		bucket := int(next.Sub(now.Add(-driftLateness(interval))) * 10 / (interval + driftLateness(interval)))
		buckets[min(bucket, 9)]++

		// The wake-up for it comes late: the check is due, not put off by another interval.
		late := next.Add(3 * time.Second)
		g.Expect(a.nextDriftCheck(infra, late)).To(BeTemporally("<=", late), "a check woken a little late is due")
		// Once made, the next check comes an interval later, at the same point.
		checked := checkedAt(i, late)
		g.Expect(a.nextDriftCheck(checked, late)).To(Equal(next.Add(interval)))
	}
	for i, n := range buckets {
		g.Expect(n).To(BeNumerically("<", 200), "tenth %d of the interval holds %d of 1000 checks: %v", i, n, buckets)
	}

	// A recent check is not repeated before half an interval passed.
	recent := checkedAt(1, now.Add(-interval/4))
	g.Expect(a.nextDriftCheck(recent, now)).To(BeTemporally(">=", now.Add(interval/4)))
}
