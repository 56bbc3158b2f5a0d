// Package kinds serves every kind a provider renders from templates (Infrastructure,
// BackupBucket, BackupEntry, DNSRecord, Bastion, SelfHostedShootExposure) with one set of
// operations that render the templates and run terraform, a file per operation (apply,
// drift, delete, migrate) and a file per kind (infrastructure.go, dnsrecord.go, ...).
package kinds
