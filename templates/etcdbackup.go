package templates

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// EtcdBackupBucketNameKey is the key of the bucket's name in the Secret etcd-backup, which
// the controller writes from the BackupEntry's spec.bucketName (Gardener's
// DataKeyBackupBucketName); a provider declares no value for it.
const EtcdBackupBucketNameKey = "bucketName"

// checkEtcdBackupSecret checks kinds.<kind>.etcdBackupSecret; errors start with the
// field's path below kinds.<kind>.
func (m *KindManifest) checkEtcdBackupSecret(kind Kind) error {
	if len(m.EtcdBackupSecret) > 0 && kind != KindBackupEntry {
		return fmt.Errorf("etcdBackupSecret: only a backupentry writes the Secret etcd-backup")
	}
	for _, key := range slices.Sorted(maps.Keys(m.EtcdBackupSecret)) {
		switch {
		case !secretKey.MatchString(key):
			return fmt.Errorf("etcdBackupSecret: %q is not a Secret key", key)
		case key == EtcdBackupBucketNameKey:
			return fmt.Errorf("etcdBackupSecret: %q is written from the BackupEntry's spec.bucketName, not from an output", key)
		case m.EtcdBackupSecret[key] == "":
			return fmt.Errorf("etcdBackupSecret: %q names no output", key)
		}
	}
	return nil
}

// checkGeneratedSecret refuses a backupbucket's generatedSecret that lacks a key the
// provider's backupentry credentials require: gardenlet hands the generated Secret, and
// only it, to each of the bucket's entries as their credentials, and the entries would be
// refused.
func checkGeneratedSecret(kinds map[Kind]*KindProvider, p *Provider) error {
	bucket, entry := kinds[KindBackupBucket], kinds[KindBackupEntry]
	if bucket == nil || entry == nil || len(bucket.Manifest.Status.GeneratedSecret) == 0 {
		return nil
	}
	var missing []string
	for _, c := range entry.DeclaredCredentials(false) {
		if c.Optional {
			continue
		}
		if _, ok := bucket.Manifest.Status.GeneratedSecret[c.Key]; !ok && !slices.ContainsFunc(c.Aliases, func(a string) bool {
			_, ok := bucket.Manifest.Status.GeneratedSecret[a]
			return ok
		}) {
			missing = append(missing, c.Key)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: kinds.%s.status.generatedSecret: lacks %s, which the credentials of provider %q's backupentry require: gardenlet hands the generated Secret to the bucket's BackupEntries as their credentials; declare no generatedSecret to have them get the bucket's own",
			manifestFile, KindBackupBucket, strings.Join(missing, ", "), p.Manifest.Type)
	}
	return nil
}

// EtcdBackupData is what the kind's etcdBackupSecret declares, from terraform's outputs
// (JSON-typed values, sensitive ones included): the keys the Secret etcd-backup holds
// besides the credentials and bucketName. Nil when it declares none.
func (k *KindProvider) EtcdBackupData(outputs map[string]any) (map[string][]byte, error) {
	if len(k.Manifest.EtcdBackupSecret) == 0 {
		return nil, nil
	}
	data := make(map[string][]byte, len(k.Manifest.EtcdBackupSecret))
	for _, key := range slices.Sorted(maps.Keys(k.Manifest.EtcdBackupSecret)) {
		value, err := stringOutput(k.Type, k.Manifest.EtcdBackupSecret[key], outputs)
		if err != nil {
			return nil, err
		}
		data[key] = []byte(value)
	}
	return data, nil
}
