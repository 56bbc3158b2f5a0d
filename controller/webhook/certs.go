package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// certificates follows the certificate Secret that cert-controller rotates: it serves
// the current certificate to the webhook server and writes it to the directory where
// cert-controller checks that it arrived.
type certificates struct {
	key     types.NamespacedName
	dir     string
	current atomic.Pointer[tls.Certificate]
	mgr     manager.Manager
}

var _ manager.LeaderElectionRunnable = &certificates{}

// NeedLeaderElection is false: every replica serves admissions.
func (s *certificates) NeedLeaderElection() bool { return false }

// GetCertificate is the TLS server's: the Secret's certificate, once there is one.
func (s *certificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("the webhook has no serving certificate yet")
}

func (s *certificates) update(ctx context.Context, secret *corev1.Secret) {
	log := ctrl.LoggerFrom(ctx).WithValues("secret", s.key)
	certPEM, keyPEM := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		log.Error(err, "unusableWebhookCertificate")
		return
	}
	if err := writeFiles(s.dir, map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}); err != nil {
		log.Error(err, "writingWebhookCertificate", "dir", s.dir)
		return
	}
	if old := s.current.Swap(&pair); old == nil || !equalChains(old.Certificate, pair.Certificate) {
		log.Info("webhookCertificateLoaded", "notAfter", pair.Leaf.NotAfter)
	}
}

func equalChains(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

// writeFiles replaces each file by a rename, so a reader never sees half a key.
func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, content := range files {
		tmp, err := os.CreateTemp(dir, "."+name+"-*")
		if err != nil {
			return err
		}
		_, err = tmp.Write(content)
		if closeErr := tmp.Close(); err == nil {
			err = closeErr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, name))
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// Start watches the one Secret with a cache of its own, so that the manager's cache does
// not hold every Secret of the cluster.
func (s *certificates) Start(ctx context.Context) error {
	secrets, err := cache.New(s.mgr.GetConfig(), cache.Options{
		Scheme:            s.mgr.GetScheme(),
		Mapper:            s.mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{s.key.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", s.key.Name)},
		},
	})
	if err != nil {
		return err
	}
	informer, err := secrets.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.updateFrom(ctx, obj) },
		UpdateFunc: func(_, obj any) { s.updateFrom(ctx, obj) },
	}); err != nil {
		return err
	}
	return secrets.Start(ctx)
}

func (s *certificates) updateFrom(ctx context.Context, obj any) {
	if secret, ok := obj.(*corev1.Secret); ok && secret.Name == s.key.Name {
		s.update(ctx, secret)
	}
}
