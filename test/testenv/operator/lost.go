package operator

import (
	"context"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
)

// LostResources are the resources an apply's recovery stopped at, read from the
// confirmation infra's last error asks for: a lost state's index names them and the
// configuration no longer declares them. nil when it did not stop so, or when they are
// confirmed already (the error stays until the next reconcile).
func LostResources(infra *extensionsv1alpha1.Infrastructure) []string {
	if infra.Status.LastError == nil {
		return nil
	}
	_, asked, found := strings.Cut(infra.Status.LastError.Description, kinds.AnnotationLostRemoved+"=")
	if !found {
		return nil
	}
	quoted, err := strconv.QuotedPrefix(asked)
	if err != nil {
		return nil
	}
	list, _ := strconv.Unquote(quoted)
	if infra.Annotations[kinds.AnnotationLostRemoved] == list {
		return nil
	}
	return strings.Split(list, ",")
}

// ConfirmLostRemoved confirms, as an operator does once they are removed by hand, that the
// lost resources named are gone.
func ConfirmLostRemoved(ctx context.Context, c client.Client, infra *extensionsv1alpha1.Infrastructure, addresses []string) error {
	patch := client.MergeFrom(infra.DeepCopy())
	metav1.SetMetaDataAnnotation(&infra.ObjectMeta, kinds.AnnotationLostRemoved, strings.Join(addresses, ","))
	return c.Patch(ctx, infra, patch)
}
