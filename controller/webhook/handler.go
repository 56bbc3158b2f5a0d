package webhook

import (
	"context"
	"encoding/json"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/mutations"
)

// handler mutates the control-plane Deployments of one provider type's shoot namespaces;
// the webhook configuration sends it only those (a namespace selector per type).
type handler struct {
	provider *templates.Provider
	reader   client.Reader
}

var _ admission.Handler = &handler{}

func (h *handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != appsv1.GroupName || req.Kind.Kind != "Deployment" {
		return admission.Allowed("not a Deployment")
	}
	deployment := &appsv1.Deployment{}
	if err := json.Unmarshal(req.Object.Raw, deployment); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !isControlPlane(deployment) {
		return admission.Allowed("not a control-plane Deployment")
	}
	var cluster *extensionsv1alpha1.Cluster
	if h.provider.Mutations().ReadsCluster() {
		cluster = &extensionsv1alpha1.Cluster{}
		if err := h.reader.Get(ctx, client.ObjectKey{Name: req.Namespace}, cluster); apierrors.IsNotFound(err) {
			cluster = nil
		} else if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	changed, err := MutateDeployment(h.provider, deployment, req.Namespace, cluster)
	if err != nil {
		// The provider's data or the Cluster is wrong: refusing keeps an unmutated
		// control plane from running, and the message reaches whoever wrote the Deployment.
		return admission.Errored(http.StatusUnprocessableEntity, err)
	}
	if !changed {
		return admission.Allowed("no mutation for this Deployment")
	}
	mutated, err := json.Marshal(deployment)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	response := admission.PatchResponseFromRaw(req.Object.Raw, mutated)
	ctrl.LoggerFrom(ctx).V(1).Info("mutatedDeployment", "namespace", req.Namespace, "name", deployment.Name, "type", h.provider.Manifest.Type, "patches", len(response.Patches))
	return response
}

// isControlPlane says whether a Deployment is one of Gardener's control-plane Deployments:
// its name and its app and role labels agree, so that a Deployment labelled like a
// control-plane component is not taken for one.
func isControlPlane(d *appsv1.Deployment) bool {
	role, known := mutations.ControlPlaneDeployments[d.Name]
	return known && d.Labels[labelApp] == appKubernetes && d.Labels[labelRole] == role
}

// MutateDeployment applies the provider's mutation of a control-plane Deployment in a
// shoot namespace, rendered from the namespace's Cluster (nil when there is none). It
// reports false when the provider has nothing for the Deployment.
func MutateDeployment(p *templates.Provider, d *appsv1.Deployment, namespace string, cluster *extensionsv1alpha1.Cluster) (bool, error) {
	if !isControlPlane(d) {
		return false, nil
	}
	mutation, err := p.Mutations().Render(d.Name, mutations.Input{Namespace: namespace, Cluster: cluster})
	if err != nil || mutation == nil {
		return false, err
	}
	Mutate(&d.Spec.Template.Spec, mutation)
	return true, nil
}
