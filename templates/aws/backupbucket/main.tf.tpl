{{- /* A BackupBucket is an S3 bucket named after the object, set up as Gardener's AWS
extension sets it up, so that a bucket it created is taken over unchanged: encrypted
with S3's own keys, no public access, a policy refusing plain HTTP, and a lifecycle
rule aborting multipart uploads an interrupted backup left behind. */ -}}
{{- $config := dig "providerConfig" dict .object.spec -}}
{{- $immutability := dig "immutability" dict $config -}}
{{- $lockDays := 0 -}}
{{- if $immutability -}}
{{- /* S3 locks objects for whole days; Gardener's extension refuses any other period. */ -}}
{{- $period := toString (dig "retentionPeriod" "" $immutability) -}}
{{- $hours := regexFind "^[0-9]+" $period | atoi -}}
{{- if or (not (regexMatch "^[0-9]+h(0m(0s)?)?$" $period)) (lt $hours 24) (ne (mod $hours 24) 0) -}}
{{- invalid "providerConfig.immutability.retentionPeriod" $immutability.retentionPeriod "S3 locks objects for whole days: use a multiple of 24h, at least 24h" -}}
{{- end -}}
{{- $lockDays = div $hours 24 -}}
{{- end -}}
{{ template "aws.kindProvider" (dict "root" . "region" (tfvar "region" .object.spec.region) "services" (list "s3") "pathStyle" true) }}

# Deleting the BackupBucket deletes the backups in it, as Gardener's extension does; the
# protection of aws_s3_bucket only stops an apply that would replace the bucket.
resource "aws_s3_bucket" "bucket" {
  bucket        = {{ tfvar "bucket_name" .object.metadata.name }}
  force_destroy = true
{{- if $immutability }}
  # Object lock can only be switched on when the bucket is created.
  object_lock_enabled = true
{{- end }}

  lifecycle {
    # Immutability given to an existing bucket turns object lock on through the lock
    # configuration, and taken away keeps it on (S3 cannot turn it off): neither may
    # replace the bucket.
    ignore_changes = [object_lock_enabled]
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "bucket" {
  bucket = aws_s3_bucket.bucket.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_public_access_block" "bucket" {
  bucket                  = aws_s3_bucket.bucket.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# Gardener's policy, word for word. It follows the public access block because S3 refuses
# two concurrent changes of a bucket's access settings.
resource "aws_s3_bucket_policy" "bucket" {
  depends_on = [aws_s3_bucket_public_access_block.bucket]
  bucket     = aws_s3_bucket.bucket.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.bucket.arn, "${aws_s3_bucket.bucket.arn}/*"]
      Condition = {
        Bool            = { "aws:SecureTransport" = "false" }
        NumericLessThan = { "s3:TlsVersion" = "1.2" }
      }
    }]
  })
}

resource "aws_s3_bucket_lifecycle_configuration" "bucket" {
  bucket = aws_s3_bucket.bucket.id

  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}

    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }

  # A BackupEntry's deletion deletes every version under its prefix but those an object
  # lock keeps, which it tags: they expire here once the lock allows it, the current
  # version first becoming noncurrent.
  rule {
    id     = "expire-objects-to-be-deleted"
    status = "Enabled"
    filter {
      tag {
        key   = "gardener.cloud/to-be-deleted"
        value = "true"
      }
    }

    expiration {
      days = 1
    }

    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }
}
{{- if $immutability }}

# Object lock needs versioning. Taking immutability away leaves versioning on, as
# Gardener's extension does: S3 refuses to suspend it while object lock is on, and the
# provider then only forgets the resource.
resource "aws_s3_bucket_versioning" "bucket" {
  bucket = aws_s3_bucket.bucket.id

  versioning_configuration {
    status = "Enabled"
  }
}

# Destroying the configuration removes the default retention and keeps object lock on,
# which is how Gardener's extension takes immutability away.
resource "aws_s3_bucket_object_lock_configuration" "bucket" {
  depends_on = [aws_s3_bucket_versioning.bucket]
  bucket     = aws_s3_bucket.bucket.id

  rule {
    default_retention {
      mode = {{ tfvar "object_lock_mode" (upper (toString $immutability.mode)) }}
      days = {{ tfvar "object_lock_days" $lockDays }}
    }
  }
}
{{- end }}
