package executor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// checkCredentialFiles refuses a credential file whose Secret is in another namespace than
// the run pod: a pod mounts Secrets of its own namespace only.
func checkCredentialFiles(req run.Request) error {
	for i, f := range req.Files {
		if f.Secret.Namespace != req.ID.Namespace {
			return run.InvalidInput(fmt.Sprintf("files[%d].secret", i),
				fmt.Sprintf("%s: a run pod mounts it, so it must be in the run's namespace %q", f.Secret, req.ID.Namespace))
		}
	}
	return nil
}

// credentialVolumes mounts each credential file of req from its Secret into the run pod,
// whole (no subPath), so that the kubelet refreshes it when the Secret changes: gardenlet
// renews a workload identity's token while a run may still need it.
func credentialVolumes(req run.Request) ([]corev1.Volume, []corev1.VolumeMount, []corev1.EnvVar) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	var env []corev1.EnvVar
	for i, f := range req.Files {
		name := "credentials-" + strconv.Itoa(i)
		dir := filepath.Join(podCredentialsDir, strconv.Itoa(i))
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  f.Secret.Name,
			Items:       []corev1.KeyToPath{{Key: f.Key, Path: f.Key}},
			DefaultMode: ptr.To(int32(0o440)),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: f.Env, Value: filepath.Join(dir, f.Key)})
	}
	return volumes, mounts, env
}

// credentialFiles writes the credential files of a local run into dir and keeps them as
// fresh as their Secrets, read again every interval, until the returned stop is called:
// as the kubelet does for a run pod, so that a run outliving a workload identity's token
// reads the renewed one. A file is replaced whole (written beside it, then renamed), so
// that terraform never reads half a token. It returns the environment giving the paths.
func credentialFiles(ctx context.Context, c client.Reader, dir string, files []run.CredentialFile, interval time.Duration) (map[string]string, func(), error) {
	env := map[string]string{}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, "credentials", strconv.Itoa(i), f.Key)
		if err := os.MkdirAll(filepath.Dir(paths[i]), 0o700); err != nil {
			return nil, nil, fmt.Errorf("creating the directory of a credential file: %w", err)
		}
		if _, err := refreshCredentialFile(ctx, c, f, paths[i]); err != nil {
			return nil, nil, err
		}
		env[f.Env] = paths[i]
	}
	if len(files) == 0 {
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
			for i, f := range files {
				changed, err := refreshCredentialFile(ctx, c, f, paths[i])
				switch {
				case err != nil && ctx.Err() == nil:
					// The file keeps its content: a token read a moment ago is still valid.
					log.Info("credentialFileNotRefreshed", "secret", f.Secret, "key", f.Key, "error", err.Error())
				case changed:
					log.V(1).Info("credentialFileRefreshed", "secret", f.Secret, "key", f.Key)
				}
			}
		}
	}()
	return env, func() { cancel(); <-done }, nil
}

// refreshCredentialFile writes f's key of its Secret to path when it differs from the
// file's content, and says whether it did.
func refreshCredentialFile(ctx context.Context, c client.Reader, f run.CredentialFile, path string) (bool, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, f.Secret, secret); err != nil {
		return false, fmt.Errorf("reading the Secret %s of a credential file: %w", f.Secret, err)
	}
	value, ok := secret.Data[f.Key]
	if !ok {
		return false, fmt.Errorf("the Secret %s holds no key %q for a credential file", f.Secret, f.Key)
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
