//! Objects in an S3 bucket (AWS or any S3-compatible server). Credentials and region come
//! from the standard AWS environment (variables, profile files, instance roles); an explicit
//! endpoint selects an S3-compatible server, addressed path-style.

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream as S3Body;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio_util::io::ReaderStream;

use super::{validate_key, ByteStream, ObjectInfo, ObjectStore};
use crate::StoreError;

/// Parts of a multipart upload; S3 requires at least 5 MiB for all parts but the last.
const PART_SIZE: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    /// Key prefix inside the bucket, without leading or trailing '/'.
    pub prefix: String,
    /// Endpoint of an S3-compatible server, e.g. `http://127.0.0.1:3900`.
    pub endpoint: Option<String>,
    /// Region; falls back to the AWS environment, then `us-east-1`.
    pub region: Option<String>,
}

pub struct S3Store {
    client: aws_sdk_s3::Client,
    cfg: S3Config,
}

impl S3Store {
    pub async fn connect(cfg: &S3Config) -> Result<S3Store, StoreError> {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = &cfg.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        let shared = loader.load().await;
        let mut builder = aws_sdk_s3::config::Builder::from(&shared).force_path_style(true);
        if shared.region().is_none() {
            builder = builder.region(aws_config::Region::new("us-east-1"));
        }
        if let Some(endpoint) = &cfg.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        Ok(S3Store {
            client: aws_sdk_s3::Client::from_conf(builder.build()),
            cfg: cfg.clone(),
        })
    }

    fn full_key(&self, key: &str) -> Result<String, StoreError> {
        validate_key(key)?;
        Ok(if self.cfg.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{}", self.cfg.prefix, key)
        })
    }

    fn strip(&self, full: &str) -> Option<String> {
        if self.cfg.prefix.is_empty() {
            Some(full.to_string())
        } else {
            full.strip_prefix(&format!("{}/", self.cfg.prefix))
                .map(str::to_string)
        }
    }

    async fn put_single(&self, key: &str, full: &str, body: Bytes) -> Result<(), StoreError> {
        self.client
            .put_object()
            .bucket(&self.cfg.bucket)
            .key(full)
            .body(S3Body::from(body))
            .send()
            .await
            .map_err(|e| StoreError::s3(key, e))?;
        Ok(())
    }

    async fn put_multipart(
        &self,
        key: &str,
        full: &str,
        first: Bytes,
        body: &mut ByteStream,
    ) -> Result<u64, StoreError> {
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.cfg.bucket)
            .key(full)
            .send()
            .await
            .map_err(|e| StoreError::s3(key, e))?;
        let upload_id = created.upload_id().unwrap_or_default().to_string();
        let result = async {
            let mut parts = Vec::new();
            let mut size = first.len() as u64;
            parts.push(self.upload_part(key, full, &upload_id, 1, first).await?);
            let mut buf = BytesMut::with_capacity(PART_SIZE);
            loop {
                let next = body.next().await;
                let done = next.is_none();
                if let Some(chunk) = next {
                    let chunk = chunk.map_err(|source| StoreError::Io {
                        key: key.to_string(),
                        source,
                    })?;
                    size += chunk.len() as u64;
                    buf.extend_from_slice(&chunk);
                }
                if buf.len() >= PART_SIZE || (done && !buf.is_empty()) {
                    let n = parts.len() as i32 + 1;
                    let part = buf.split().freeze();
                    parts.push(self.upload_part(key, full, &upload_id, n, part).await?);
                }
                if done {
                    break;
                }
            }
            self.client
                .complete_multipart_upload()
                .bucket(&self.cfg.bucket)
                .key(full)
                .upload_id(&upload_id)
                .multipart_upload(
                    CompletedMultipartUpload::builder()
                        .set_parts(Some(parts))
                        .build(),
                )
                .send()
                .await
                .map_err(|e| StoreError::s3(key, e))?;
            Ok(size)
        }
        .await;
        if result.is_err() {
            let abort = self
                .client
                .abort_multipart_upload()
                .bucket(&self.cfg.bucket)
                .key(full)
                .upload_id(&upload_id)
                .send()
                .await;
            if let Err(e) = abort {
                tracing::warn!(key, error = %e, "could not abort a failed multipart upload");
            }
        }
        result
    }

    async fn upload_part(
        &self,
        key: &str,
        full: &str,
        upload_id: &str,
        number: i32,
        body: Bytes,
    ) -> Result<CompletedPart, StoreError> {
        let out = self
            .client
            .upload_part()
            .bucket(&self.cfg.bucket)
            .key(full)
            .upload_id(upload_id)
            .part_number(number)
            .body(S3Body::from(body))
            .send()
            .await
            .map_err(|e| StoreError::s3(key, e))?;
        Ok(CompletedPart::builder()
            .set_e_tag(out.e_tag().map(str::to_string))
            .part_number(number)
            .build())
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    async fn put_stream(&self, key: &str, mut body: ByteStream) -> Result<u64, StoreError> {
        let full = self.full_key(key)?;
        // Fill the first part; small objects go up in one request, large ones as multipart.
        let mut first = BytesMut::new();
        let mut ended = false;
        while first.len() < PART_SIZE {
            match body.next().await {
                Some(chunk) => {
                    first.extend_from_slice(&chunk.map_err(|source| StoreError::Io {
                        key: key.to_string(),
                        source,
                    })?)
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        if ended {
            let size = first.len() as u64;
            self.put_single(key, &full, first.freeze()).await?;
            Ok(size)
        } else {
            self.put_multipart(key, &full, first.freeze(), &mut body)
                .await
        }
    }

    async fn get_stream(&self, key: &str) -> Result<ByteStream, StoreError> {
        let full = self.full_key(key)?;
        let out = self
            .client
            .get_object()
            .bucket(&self.cfg.bucket)
            .key(&full)
            .send()
            .await
            .map_err(|e| {
                if e.as_service_error().is_some_and(|s| s.is_no_such_key()) {
                    StoreError::ObjectNotFound(key.to_string())
                } else {
                    StoreError::s3(key, e)
                }
            })?;
        Ok(Box::pin(ReaderStream::with_capacity(
            out.body.into_async_read(),
            256 * 1024,
        )))
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let full = self.full_key(key)?;
        match self
            .client
            .head_object()
            .bucket(&self.cfg.bucket)
            .key(&full)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out.content_length().unwrap_or(0).max(0) as u64)),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(None),
            Err(e) => Err(StoreError::s3(key, e)),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let full = self.full_key(key)?;
        self.client
            .delete_object()
            .bucket(&self.cfg.bucket)
            .key(&full)
            .send()
            .await
            .map_err(|e| StoreError::s3(key, e))?;
        Ok(())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        let full_prefix = if self.cfg.prefix.is_empty() {
            prefix.to_string()
        } else {
            format!("{}/{}", self.cfg.prefix, prefix)
        };
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.cfg.bucket)
            .prefix(&full_prefix)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| StoreError::s3(prefix, e))?;
            for obj in page.contents() {
                if let Some(key) = obj.key().and_then(|k| self.strip(k)) {
                    out.push(ObjectInfo {
                        key,
                        size: obj.size().unwrap_or(0).max(0) as u64,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn check(&self) -> Result<(), StoreError> {
        self.client
            .head_bucket()
            .bucket(&self.cfg.bucket)
            .send()
            .await
            .map_err(|e| StoreError::s3(&self.cfg.bucket, e))?;
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "s3://{}/{} at {}",
            self.cfg.bucket,
            self.cfg.prefix,
            self.cfg.endpoint.as_deref().unwrap_or("AWS")
        )
    }
}
