//! Object storage for model files, variant files, validation sets and job data.
//!
//! Two backends behind one trait: a local directory (the embedded default) and S3
//! (any S3-compatible server with path-style addressing). Bodies move as streams so that
//! large objects are never held whole in memory.

mod local;
mod s3;

use std::pin::Pin;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

pub use local::LocalDirStore;
pub use s3::{S3Config, S3Store};

use crate::StoreError;

/// A body of bytes arriving in chunks.
pub type ByteStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

/// A listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
}

#[async_trait]
pub trait ObjectStore: Send + Sync + 'static {
    /// Writes `body` under `key` (replacing any object there) and returns its size.
    /// The object becomes visible only once complete.
    async fn put_stream(&self, key: &str, body: ByteStream) -> Result<u64, StoreError>;

    /// Reads the object under `key` as a stream.
    async fn get_stream(&self, key: &str) -> Result<ByteStream, StoreError>;

    /// Size of the object, or `None` when absent.
    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError>;

    /// Deletes the object; deleting an absent object succeeds.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;

    /// Objects whose keys start with `prefix`, sorted by key.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError>;

    /// Answers when the store is reachable and writable enough to serve (readiness).
    async fn check(&self) -> Result<(), StoreError>;

    /// Where the objects live, for logs (no secrets).
    fn describe(&self) -> String;

    async fn put_bytes(&self, key: &str, bytes: Bytes) -> Result<u64, StoreError> {
        let body: ByteStream = Box::pin(futures::stream::once(async move { Ok(bytes) }));
        self.put_stream(key, body).await
    }

    /// Reads a whole object into memory: only for objects known to be small
    /// (validation sets and models are bounded by the upload limit).
    async fn get_bytes(&self, key: &str) -> Result<Bytes, StoreError> {
        let mut stream = self.get_stream(key).await?;
        let mut buf = BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|source| StoreError::Io {
                key: key.to_string(),
                source,
            })?;
            buf.extend_from_slice(&chunk);
        }
        Ok(buf.freeze())
    }

    /// Deletes every object under `prefix`; returns how many were deleted.
    async fn delete_prefix(&self, prefix: &str) -> Result<u64, StoreError> {
        let objects = self.list(prefix).await?;
        for o in &objects {
            self.delete(&o.key).await?;
        }
        Ok(objects.len() as u64)
    }
}

/// Where objects are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectStoreConfig {
    LocalDir(std::path::PathBuf),
    S3(S3Config),
}

impl ObjectStoreConfig {
    /// Parses `s3://bucket/prefix` or a directory path (optionally `file://`).
    pub fn parse(
        location: &str,
        s3_endpoint: Option<String>,
        s3_region: Option<String>,
    ) -> Result<Self, StoreError> {
        if let Some(rest) = location.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(StoreError::InvalidLocation(location.to_string()));
            }
            Ok(ObjectStoreConfig::S3(S3Config {
                bucket: bucket.to_string(),
                prefix: prefix.trim_matches('/').to_string(),
                endpoint: s3_endpoint,
                region: s3_region,
            }))
        } else {
            let path = location.strip_prefix("file://").unwrap_or(location);
            if path.is_empty() || location.contains("://") && !location.starts_with("file://") {
                return Err(StoreError::InvalidLocation(location.to_string()));
            }
            Ok(ObjectStoreConfig::LocalDir(path.into()))
        }
    }
}

/// Opens the configured store (creating the directory for a local store).
pub async fn open_object_store(
    cfg: &ObjectStoreConfig,
) -> Result<std::sync::Arc<dyn ObjectStore>, StoreError> {
    Ok(match cfg {
        ObjectStoreConfig::LocalDir(dir) => std::sync::Arc::new(LocalDirStore::open(dir).await?),
        ObjectStoreConfig::S3(s3) => std::sync::Arc::new(S3Store::connect(s3).await?),
    })
}

/// Keys are relative paths of `[A-Za-z0-9._-]` segments separated by '/'.
pub(crate) fn validate_key(key: &str) -> Result<(), StoreError> {
    let bad = |reason| {
        Err(StoreError::InvalidKey {
            key: key.to_string(),
            reason,
        })
    };
    if key.is_empty() || key.len() > 900 {
        return bad("keys are 1-900 characters long");
    }
    for seg in key.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return bad("empty, '.' and '..' path segments are not allowed");
        }
        if seg.len() > 255 {
            // A file name's limit on the local store's file systems; S3 keys follow the same rule.
            return bad("path segments are at most 255 characters long");
        }
        if !seg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '='))
        {
            return bad("only letters, digits, '.', '_', '-', '=' and '/' are allowed");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_locations() {
        assert_eq!(
            ObjectStoreConfig::parse("s3://models/prod/x", None, None).unwrap(),
            ObjectStoreConfig::S3(S3Config {
                bucket: "models".into(),
                prefix: "prod/x".into(),
                endpoint: None,
                region: None
            })
        );
        assert_eq!(
            ObjectStoreConfig::parse("./data/objects", None, None).unwrap(),
            ObjectStoreConfig::LocalDir("./data/objects".into())
        );
        assert!(ObjectStoreConfig::parse("s3:///x", None, None).is_err());
        assert!(ObjectStoreConfig::parse("gs://b/x", None, None).is_err());
    }

    #[test]
    fn keys() {
        assert!(validate_key("t/abc/models/m1/source.onnx").is_ok());
        assert!(validate_key("../etc/passwd").is_err());
        assert!(validate_key("/abs").is_err());
        assert!(validate_key("a//b").is_err());
        assert!(validate_key("a b").is_err());
        assert!(validate_key("").is_err());
    }
}
