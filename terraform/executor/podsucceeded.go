package executor

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
)

// watchSucceeded follows the run's configuration ConfigMap until ctx ends, and sends
// what the run pod of this UID wrote there once its run succeeded
// (report.AnnotationSucceeded). The kubelet sees a container's end only when it next
// lists the node's containers, every second, and reports it after that: a run that says
// so itself ends up to a second earlier. Nothing is sent for a pod that wrote nothing,
// one of an older version, or one that failed: the pod's status tells those, and a
// failure's reason (a deadline) is the kubelet's to tell.
func (e *PodExecutor) watchSucceeded(ctx context.Context, id run.ID, uid types.UID) <-chan report.Succeeded {
	succeeded := make(chan report.Succeeded, 1)
	if uid == "" {
		return succeeded
	}
	configMaps := e.Clientset.CoreV1().ConfigMaps(id.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", id.ConfigName()).String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			options.FieldSelector = byName
			return configMaps.List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = byName
			return configMaps.Watch(ctx, options)
		},
	}
	go func() {
		// It ends with ctx, when the run ended either way.
		_, _ = watchtools.UntilWithSync(ctx, lw, &corev1.ConfigMap{}, nil, func(event watch.Event) (bool, error) {
			cm, ok := event.Object.(*corev1.ConfigMap)
			if !ok {
				return false, nil
			}
			s, ok := report.SucceededOf(cm.Annotations)
			if !ok || s.Pod != uid {
				return false, nil
			}
			succeeded <- s
			return true, nil
		})
	}()
	return succeeded
}

// exitedWith is pod as the kubelet will report it once it sees that the terraformer
// exited successfully with this termination message; pod itself when the kubelet
// already reported the container's end.
func exitedWith(pod *corev1.Pod, message string) *corev1.Pod {
	if _, ok := exited(pod); ok {
		return pod
	}
	pod = pod.DeepCopy()
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:  pod.Spec.Containers[0].Name,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: message}},
	}}
	return pod
}
