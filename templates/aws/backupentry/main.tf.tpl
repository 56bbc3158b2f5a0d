{{- /* Gardener's AWS extension creates nothing for a BackupEntry: etcd's backups go under
the prefix "<entry name>/" of the bucket, and the entry only names it. An object marking
the prefix would be more than Gardener makes, and in a bucket with compliance-mode
immutability it could not be deleted before its retention ends, which would hold the
entry's deletion for days. So the entry reads its bucket, which proves that the bucket
exists and that the entry's credentials reach it, and reports the prefix. Deleting the
entry destroys nothing of terraform's; the backups under the prefix, which terraform has
no resource for, are purged before the destroy, as provider.yaml declares (purge).
Restored on another seed with that seed's bucket (a control plane migration), the entry
reads the new bucket and replaces nothing: the backups under the prefix in the source
seed's bucket are the "source-" entry's to read, and neither entry purges them. */ -}}
{{ template "aws.kindProvider" (dict "root" . "region" (tfvar "region" .object.spec.region) "services" (list "s3") "pathStyle" true) }}

data "aws_s3_bucket" "bucket" {
  bucket = {{ tfvar "bucket_name" .object.spec.bucketName }}
}
