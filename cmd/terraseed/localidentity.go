package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sampleIdentity is the ServiceAccount whose tokens the workload identity sample's
// Secret holds, as gardenlet's hold a WorkloadIdentity's.
const sampleIdentity = "sample-workload-identity"

// sampleTokenLifetime is the sample's token lifetime, the least the API server issues:
// the token is renewed at half of it, as gardenlet renews a WorkloadIdentity's.
const sampleTokenLifetime = 10 * time.Minute

// sampleWorkloadIdentity returns the sample's credentials Secret as gardenlet writes it for
// a WorkloadIdentity, with a token of a ServiceAccount allowed to create what the local
// provider creates, and keeps renewing the token in it until ctx ends.
func sampleWorkloadIdentity(ctx context.Context, cfg *rest.Config, c client.Client) (*corev1.Secret, error) {
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sampleNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNamespace, Name: sampleIdentity}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sampleIdentity},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sampleNamespace, Name: sampleIdentity}},
		},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the sample's workload identity: %w", err)
		}
	}
	token, err := sampleToken(ctx, clientset)
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(map[string]string{
		"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "WorkloadIdentityConfig",
		"server": cfg.Host, "certificateAuthorityData": base64.StdEncoding.EncodeToString(cfg.CAData),
	})
	if err != nil {
		return nil, err
	}
	go renewSampleToken(ctx, clientset, c)
	fmt.Printf("the sample's credentials are a workload identity's: a token of ServiceAccount %s/%s, renewed every %s\n", sampleNamespace, sampleIdentity, sampleTokenLifetime/2)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNamespace, Name: sampleSecret, Labels: map[string]string{
			"security.gardener.cloud/purpose":                   "workload-identity-token-requestor",
			"workloadidentity.security.gardener.cloud/provider": "local",
		}},
		Data: map[string][]byte{"token": []byte(token), "config": config},
	}, nil
}

func sampleToken(ctx context.Context, clientset kubernetes.Interface) (string, error) {
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(sampleTokenLifetime.Seconds()))}}
	request, err := clientset.CoreV1().ServiceAccounts(sampleNamespace).CreateToken(ctx, sampleIdentity, request, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting the sample's token: %w", err)
	}
	return request.Status.Token, nil
}

// renewSampleToken writes a new token into the sample's Secret at half the token's
// lifetime, as gardenlet does, until ctx ends.
func renewSampleToken(ctx context.Context, clientset kubernetes.Interface, c client.Client) {
	log := ctrl.Log.WithName("sample")
	ticker := time.NewTicker(sampleTokenLifetime / 2)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		token, err := sampleToken(ctx, clientset)
		if err == nil {
			secret := &corev1.Secret{}
			if err = c.Get(ctx, client.ObjectKey{Namespace: sampleNamespace, Name: sampleSecret}, secret); err == nil {
				secret.Data["token"] = []byte(token)
				err = c.Update(ctx, secret)
			}
		}
		if err != nil && ctx.Err() == nil {
			log.Error(err, "sampleTokenNotRenewed")
			continue
		}
		log.Info("sampleTokenRenewed")
	}
}
