package chart

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The controller reads namespaces, and only gets them, where it serves BackupEntries: an
// entry writes the Secret etcd-backup into its shoot's namespace unless that is gone or
// being deleted.
func TestNamespacesAreReadOnlyWhereBackupEntriesWriteEtcdBackup(t *testing.T) {
	for _, c := range []struct {
		kinds string
		get   bool
	}{
		{"{backupbucket,backupentry}", true},
		{"{backupentry}", true},
		{"{backupbucket,dnsrecord,bastion}", false},
	} {
		g := NewWithT(t)
		objects := render(t, "garden-terraseed", "--set", "kinds="+c.kinds)
		keys := ruleKeys(convert[rbacv1.ClusterRole](t, find(objects, "ClusterRole", "terraseed")).Rules)
		var namespaces []string
		for _, k := range keys {
			if strings.HasSuffix(k, " /namespaces") {
				namespaces = append(namespaces, k)
			}
		}
		if c.get {
			g.Expect(namespaces).To(ConsistOf("get /namespaces"), "kinds %s", c.kinds)
		} else {
			g.Expect(namespaces).To(BeEmpty(), "kinds %s", c.kinds)
		}
	}
}
