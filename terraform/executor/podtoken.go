package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// A run pod reaches the API server with a token the executor requests for the run pods'
// ServiceAccount, bound to the pod as the kubelet binds the one it mounts: it stops
// working once the pod is gone. The token and the CA reach the terraformer in its
// credentials Secret, so the pod mounts no volume at all: the kubelet waits for a pod's
// volumes by polling them every 300 ms, and a pod with none starts that much sooner
// (created → running 0.20 s against 0.49 s on the test node, median of eight each).

// tokenMargin lengthens a requested token beyond the longest a run pod may live, for
// clocks that differ between the controller, the API server and the node.
const tokenMargin = 5 * time.Minute

// errTokenTooShort is returned when the API server caps tokens below what a run pod
// may need; such a seed's run pods mount the kubelet's token instead.
var errTokenTooShort = errors.New("the API server gives tokens a shorter life than a run pod may have")

// requestsTokens reports whether run pods get a requested token instead of a mounted
// one: only when the CA they verify the API server by is known, and how long a run pod
// may live is bounded, by the creation and run timeouts.
func (e *PodExecutor) requestsTokens() bool {
	return (len(e.APICA) > 0 || e.APICAFile != "") && e.RunTimeout > 0 && e.CreationTimeout > 0 && !e.tokensTooShort.Load()
}

// stopGrace is a run pod's termination grace period: the kubelet must not kill the
// terraformer before its final save.
func (e *PodExecutor) stopGrace() time.Duration {
	return terraformer.StopBound(cmp.Or(e.Settings.StopTimeout, terraformer.DefaultStopTimeout))
}

// requestToken requests the token of pod's ServiceAccount, bound to pod, and returns
// what the terraformer reads it from. The token lives as long as the pod may: the
// creation timeout to start in, the run timeout, the grace period of the final save. A
// pod that starts later than its token allows for (StartBy) runs nothing.
func (e *PodExecutor) requestToken(ctx context.Context, pod *corev1.Pod) (map[string][]byte, error) {
	ca := e.APICA
	if len(ca) == 0 {
		// Read each time: a CA rotated in the mounted file reaches the next run.
		var err error
		if ca, err = os.ReadFile(e.APICAFile); err != nil {
			return nil, fmt.Errorf("reading the CA of the API server for the run pod: %w", err)
		}
	}
	running := e.RunTimeout + e.stopGrace() + tokenMargin
	lifetime := e.CreationTimeout + running
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(lifetime / time.Second)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	requested := time.Now()
	token, err := e.Clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, request, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting the token of ServiceAccount %s for the run pod: %w", pod.Spec.ServiceAccountName, err)
	}
	// A token capped below the run's need leaves less time to start in; the pod must
	// still have half the creation timeout (or a clock that differs by less).
	startBy := token.Status.ExpirationTimestamp.Add(-running)
	if startBy.Before(requested.Add(e.CreationTimeout / 2)) {
		return nil, fmt.Errorf("%w: asked for %s, given %s", errTokenTooShort, lifetime, token.Status.ExpirationTimestamp.Sub(requested).Round(time.Second))
	}
	return map[string][]byte{
		terraformer.EnvAPIToken:   []byte(token.Status.Token),
		terraformer.EnvAPICA:      ca,
		terraformer.EnvAPIStartBy: []byte(startBy.UTC().Format(time.RFC3339)),
	}, nil
}

// cutOffBeforeItsSecret reports whether pod is a run pod with a requested token whose
// container never started and whose credentials Secret is not there: its executor
// stopped after creating it, before writing the Secret, which only this executor writes.
func (e *PodExecutor) cutOffBeforeItsSecret(ctx context.Context, id run.ID, pod *corev1.Pod) bool {
	// Only a pod of a requested token mounts none.
	if ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
		return false
	}
	for _, status := range pod.Status.ContainerStatuses {
		if status.State.Waiting == nil {
			return false
		}
	}
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.EnvSecretName()}, &corev1.Secret{})
	return apierrors.IsNotFound(err)
}
