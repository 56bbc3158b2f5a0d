// The SelfHostedShootExposure: what makes a self-hosted shoot's API server reachable at a
// stable address (a load balancer in front of its control-plane nodes), rendered from
// templates/<type>/selfhostedshootexposure/. Its status gives the address
// (status.ingress).
//
// A reconcile reads, from the reconciler's call (controller/extension/operation.go):
// actuator.go (kindActuator.Reconcile) → apply.go (its phases, in order) → runs.go (the
// run submitted, its outcome read back) → terraform/executor (scheduler.go, pipeline.go,
// local.go or pod.go) → terraform/terraformer (runner.go, apply.go); the outputs come back
// through kind.go (servedKind.report, reportKindStatus) into reportExposureStatus, here.
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

var exposureKind = templateKind("SelfHostedShootExposure", templates.Kind("selfhostedshootexposure"), false,
	func() Subject { return &extensionsv1alpha1.SelfHostedShootExposure{} },
	func() client.ObjectList { return &extensionsv1alpha1.SelfHostedShootExposureList{} })

// reportExposureStatus sets the exposure's address from the outputs ingress.ip and
// ingress.hostname; without either it has none.
func reportExposureStatus(obj *extensionsv1alpha1.SelfHostedShootExposure, status *templates.KindStatus) {
	// Gardener reads the list; the outputs give its one element.
	ip, hostname := status.Fields["ingress.ip"], status.Fields["ingress.hostname"]
	obj.Status.Ingress = nil
	if ip != "" || hostname != "" {
		obj.Status.Ingress = []corev1.LoadBalancerIngress{{IP: ip, Hostname: hostname}}
	}
}
