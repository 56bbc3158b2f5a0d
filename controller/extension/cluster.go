package extension

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// AnnotationForceDeletion on a Shoot confirms that its resources may be left behind when
// they cannot be removed.
const AnnotationForceDeletion = "confirmation.gardener.cloud/force-deletion"

// shoot is the part of the Cluster's Shoot the protocol reads.
type shoot struct {
	Metadata struct {
		Annotations       map[string]string `json:"annotations"`
		DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status struct {
		LastOperation *struct {
			State string `json:"state"`
		} `json:"lastOperation"`
	} `json:"status"`
}

func shootOf(cluster *extensionsv1alpha1.Cluster) (*shoot, error) {
	if cluster == nil || len(cluster.Spec.Shoot.Raw) == 0 {
		return nil, nil
	}
	s := &shoot{}
	if err := json.Unmarshal(cluster.Spec.Shoot.Raw, s); err != nil {
		return nil, fmt.Errorf("reading spec.shoot of Cluster %s: %w", cluster.Name, err)
	}
	return s, nil
}

// failed is true for a shoot whose last operation failed: Gardener gave up on it, and so
// does every extension until Gardener retries.
func (s *shoot) failed() bool {
	return s != nil && s.Status.LastOperation != nil && s.Status.LastOperation.State == string(extensionsv1alpha1.LastOperationStateFailed)
}

// forceDeletion is true for a shoot being deleted whose owner confirmed force deletion.
func (s *shoot) forceDeletion() bool {
	if s == nil || s.Metadata.DeletionTimestamp == nil {
		return false
	}
	confirmed, _ := strconv.ParseBool(s.Metadata.Annotations[AnnotationForceDeletion])
	return confirmed
}

// clusterOf returns the Cluster named like the namespace, nil when there is none (an
// object outside a shoot namespace, as in tests and `make run`).
func clusterOf(ctx context.Context, c client.Reader, namespace string) (*extensionsv1alpha1.Cluster, error) {
	if namespace == "" {
		// A cluster-scoped object, a BackupBucket's, is of no shoot.
		return nil, nil
	}
	cluster := &extensionsv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Cluster %s: %w", namespace, err)
	}
	return cluster, nil
}
