package executor

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
)

// podCredentialsDir is where a run pod finds its credential files, one directory each.
const podCredentialsDir = "/credentials"

// defaultCredentialRefresh is how often a local run reads the Secrets of its credential
// files again; the kubelet refreshes a run pod's mounted Secret within about a minute.
const defaultCredentialRefresh = 30 * time.Second

// credentialVolumes mounts each credential file of req from its Secret into the run pod,
// whole (no subPath), so that the kubelet refreshes it when the Secret changes: gardenlet
// renews a workload identity's token while a run may still need it.
func credentialVolumes(req run.Request) ([]corev1.Volume, []corev1.VolumeMount, []corev1.EnvVar) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	var env []corev1.EnvVar
	for i, name := range slices.Sorted(maps.Keys(req.Files)) {
		f := req.Files[name]
		volume := "credentials-" + strconv.Itoa(i)
		dir := filepath.Join(podCredentialsDir, strconv.Itoa(i))
		volumes = append(volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  f.Name,
			Items:       []corev1.KeyToPath{{Key: f.Key, Path: f.Key}},
			DefaultMode: ptr.To(int32(0o440)),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: volume, MountPath: dir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: name, Value: filepath.Join(dir, f.Key)})
	}
	return volumes, mounts, env
}

// credentialFiles writes the credential files of a local run into dir and keeps them as
// fresh as their Secrets, read again every interval, until the returned stop is called:
// as the kubelet does for a run pod, so that a run outliving a workload identity's token
// reads the renewed one. A file is replaced whole (written beside it, then renamed), so
// that terraform never reads half a token. It returns the environment giving the paths.
func credentialFiles(ctx context.Context, c client.Reader, namespace, dir string, files map[string]corev1.SecretKeySelector, interval time.Duration) (map[string]string, func(), error) {
	env := map[string]string{}
	type file struct {
		secret client.ObjectKey
		key    string
		path   string
	}
	var list []file
	for i, name := range slices.Sorted(maps.Keys(files)) {
		f := file{secret: client.ObjectKey{Namespace: namespace, Name: files[name].Name}, key: files[name].Key}
		f.path = filepath.Join(dir, "credentials", strconv.Itoa(i), f.key)
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			return nil, nil, fmt.Errorf("creating the directory of a credential file: %w", err)
		}
		if _, err := refreshCredentialFile(ctx, c, f.secret, f.key, f.path); err != nil {
			return nil, nil, err
		}
		env[name] = f.path
		list = append(list, f)
	}
	if len(list) == 0 {
		return env, func() {}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		log := logf.FromContext(ctx)
		ticker := time.NewTicker(cmpDuration(interval, defaultCredentialRefresh))
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			for _, f := range list {
				changed, err := refreshCredentialFile(ctx, c, f.secret, f.key, f.path)
				switch {
				case err != nil && ctx.Err() == nil:
					// The file keeps its content: a token read a moment ago is still valid.
					log.Info("credentialFileNotRefreshed", "secret", f.secret, "key", f.key, "error", err.Error())
				case changed:
					log.V(1).Info("credentialFileRefreshed", "secret", f.secret, "key", f.key)
				}
			}
		}
	}()
	return env, func() { cancel(); <-done }, nil
}

// refreshCredentialFile writes key of the Secret to path when it differs from the file's
// content, and says whether it did.
func refreshCredentialFile(ctx context.Context, c client.Reader, secretKey client.ObjectKey, key, path string) (bool, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, secretKey, secret); err != nil {
		return false, fmt.Errorf("reading the Secret %s of a credential file: %w", secretKey, err)
	}
	value, ok := secret.Data[key]
	if !ok {
		return false, fmt.Errorf("the Secret %s holds no key %q for a credential file", secretKey, key)
	}
	if current, err := os.ReadFile(path); err == nil && bytes.Equal(current, value) {
		return false, nil
	}
	next := path + ".next"
	if err := os.WriteFile(next, value, 0o600); err != nil {
		return false, fmt.Errorf("writing a credential file: %w", err)
	}
	if err := os.Rename(next, path); err != nil {
		return false, fmt.Errorf("writing a credential file: %w", err)
	}
	return true, nil
}

func cmpDuration(d, fallback time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return fallback
}
