// The Bastion: a host that lets an operator reach a shoot's nodes by SSH, rendered from
// templates/<type>/bastion/. Its status gives the host's address (status.ingress).
//
// A reconcile reads, from the reconciler's call (controller/extension/operation.go):
// actuator.go (kindActuator.Reconcile) → apply.go (its phases, in order) → runs.go (the
// run submitted, its outcome read back) → terraform/executor (scheduler.go, pipeline.go,
// local.go or pod.go) → terraform/terraformer (runner.go, apply.go); the outputs come back
// through kind.go (servedKind.report, reportKindStatus) into reportBastionStatus, here.
// A deletion reads: actuator.go (kindActuator.Delete) → delete.go (its phases, in order) →
// runs.go → terraform/executor (the same three files) → terraform/terraformer (runner.go,
// destroy.go): 8 files after the reconciler's.

package kinds

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

var bastionKind = templateKind("Bastion", templates.KindBastion, false,
	func() Subject { return &extensionsv1alpha1.Bastion{} }, func() client.ObjectList { return &extensionsv1alpha1.BastionList{} })

// reportBastionStatus sets the bastion's address from the outputs ingress.ip and
// ingress.hostname; without either it has none.
func reportBastionStatus(obj *extensionsv1alpha1.Bastion, status *templates.KindStatus) {
	ip, hostname := status.Fields["ingress.ip"], status.Fields["ingress.hostname"]
	obj.Status.Ingress = nil
	if ip != "" || hostname != "" {
		obj.Status.Ingress = &corev1.LoadBalancerIngress{IP: ip, Hostname: hostname}
	}
}
