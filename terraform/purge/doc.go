// Package purge deletes, before a destroy, what a provider declares a deletion removes that terraform has no resource for: the backups under a BackupEntry's prefix.
package purge
