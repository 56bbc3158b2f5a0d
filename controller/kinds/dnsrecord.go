// The DNSRecord: a record in a DNS zone, rendered from templates/<type>/dnsrecord/. Its
// runs are urgent: gardenlet waits at most two minutes for a record, so they start before
// the other kinds' that wait for a slot. Its status gives the zone.
//
// A reconcile reads, from the reconciler's call (controller/extension/operation.go):
// actuator.go (kindActuator.Reconcile) → apply.go (its phases, in order) → runs.go (the
// run submitted, its outcome read back) → terraform/executor (scheduler.go, pipeline.go,
// local.go or pod.go) → terraform/terraformer (runner.go, apply.go); the outputs come back
// through kind.go (servedKind.report, reportKindStatus) into reportDNSRecordStatus, here.
// A deletion reads: actuator.go (kindActuator.Delete) → delete.go (its phases, in order) →
// runs.go → terraform/executor (the same three files) → terraform/terraformer (runner.go,
// destroy.go): 8 files after the reconciler's.

package kinds

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

var dnsRecordKind = urgentKind(templateKind("DNSRecord", templates.KindDNSRecord, false,
	func() Subject { return &extensionsv1alpha1.DNSRecord{} }, func() client.ObjectList { return &extensionsv1alpha1.DNSRecordList{} }))

// reportDNSRecordStatus sets the record's zone, when its outputs give one.
func reportDNSRecordStatus(obj *extensionsv1alpha1.DNSRecord, status *templates.KindStatus) {
	if zone, ok := status.Fields["zone"]; ok {
		obj.Status.Zone = &zone
	}
}
