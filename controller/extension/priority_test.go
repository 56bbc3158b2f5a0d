package extension

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// A change someone asked for (a new generation, Gardener's operation annotation, the
// deletion) goes ahead of the requests the queue holds already, a burst's creations;
// an update no one asked for (the status, an annotation of the controller's) does not,
// nor an object of a type not served.
func TestAChangeSomeoneAskedForGoesAheadOfTheQueuedRequests(t *testing.T) {
	object := func(generation int64, annotations map[string]string, deleted bool, typ string) client.Object {
		record := &extensionsv1alpha1.DNSRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--a--b", Name: "b-internal", Generation: generation, Annotations: annotations}}
		record.Spec.Type = typ
		if deleted {
			now := metav1.Now()
			record.DeletionTimestamp = &now
		}
		return record
	}
	served := askedFor{serves: func(o client.Object) bool { return o.(*extensionsv1alpha1.DNSRecord).Spec.Type == "local" }}
	for _, c := range []struct {
		name     string
		old, new client.Object
		ahead    bool
	}{
		{"a new generation", object(1, nil, false, "local"), object(2, nil, false, "local"), true},
		{"Gardener's reconcile annotation", object(1, nil, false, "local"), object(1, map[string]string{AnnotationOperation: OperationReconcile}, false, "local"), true},
		{"the deletion", object(1, nil, false, "local"), object(1, nil, true, "local"), true},
		{"the status or metadata alone", object(1, nil, false, "local"), object(1, map[string]string{"other": "x"}, false, "local"), false},
		{"the operation annotation removed", object(1, map[string]string{AnnotationOperation: OperationReconcile}, false, "local"), object(1, nil, false, "local"), false},
		{"an object of another type", object(1, nil, false, "other"), object(2, nil, false, "other"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			queue := priorityqueue.New[reconcile.Request]("records")
			t.Cleanup(queue.ShutDown)
			created := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shoot--a--c", Name: "c-internal"}}
			queue.Add(created)
			changed := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c.new)}
			update := event.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}
			served.Update(context.Background(), update, queue)
			if !c.ahead {
				g.Expect(queue.Len()).To(Equal(1), "nothing added")
				return
			}
			// The builder's handler leaves it to askedFor, alone: one update is one request.
			g.Expect(asked(update)).To(BeTrue())
			g.Expect(queue.Len()).To(Equal(2))
			first, priority, _ := queue.GetWithPriority()
			g.Expect(first).To(Equal(changed))
			g.Expect(priority).To(Equal(PriorityAskedFor))
		})
	}
}
