package executor

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// podWatch is one watch on every run pod of the seed (the pods with a command label),
// shared by the runs waiting for their pod: a pod's change wakes the run waiting for it,
// and a run reads its pod from the watch's cache, with no request of its own. It runs
// while a run waits (see PodExecutor.pods).
type podWatch struct {
	lister listerscorev1.PodLister
	synced toolscache.InformerSynced

	mu      sync.Mutex
	waiters map[types.NamespacedName][]chan struct{}
}

func newPodWatch(clientset kubernetes.Interface, stop <-chan struct{}) (*podWatch, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelCommand }))
	informer := factory.Core().V1().Pods()
	w := &podWatch{lister: informer.Lister(), synced: informer.Informer().HasSynced, waiters: map[types.NamespacedName][]chan struct{}{}}
	notify := func(obj any) {
		if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			w.changed(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
	if _, err := informer.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}); err != nil {
		return nil, err
	}
	factory.Start(stop)
	return w, nil
}

// next returns a channel closed at the pod's next change.
func (w *podWatch) next(key types.NamespacedName) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.waiters[key] = append(w.waiters[key], ch)
	return ch
}

func (w *podWatch) changed(key types.NamespacedName) {
	w.mu.Lock()
	waiting := w.waiters[key]
	delete(w.waiters, key)
	w.mu.Unlock()
	for _, ch := range waiting {
		close(ch)
	}
}

// get reads the pod from the watch's cache, once the cache is synced; nil when it holds none.
func (w *podWatch) get(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	if !toolscache.WaitForCacheSync(ctx.Done(), w.synced) {
		return nil, fmt.Errorf("watching run pods: %w", ctx.Err())
	}
	pod, err := w.lister.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pod, err
}
