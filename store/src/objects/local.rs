//! Objects as files under a directory. Writes go to a temporary file that is renamed into
//! place, so a reader never sees a half-written object.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio_util::io::ReaderStream;

use super::{validate_key, ByteStream, ObjectInfo, ObjectStore};
use crate::StoreError;

pub struct LocalDirStore {
    root: PathBuf,
}

impl LocalDirStore {
    pub async fn open(root: &Path) -> Result<LocalDirStore, StoreError> {
        tokio::fs::create_dir_all(root)
            .await
            .map_err(|source| StoreError::Io {
                key: root.display().to_string(),
                source,
            })?;
        let root = tokio::fs::canonicalize(root)
            .await
            .map_err(|source| StoreError::Io {
                key: root.display().to_string(),
                source,
            })?;
        Ok(LocalDirStore { root })
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        validate_key(key)?;
        Ok(self.root.join(key))
    }
}

fn io(key: &str) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        key: key.to_string(),
        source,
    }
}

/// A write's error: a path that is a folder here, or under a file, is a conflict with what is
/// stored (a file system path cannot be both), anything else an I/O error.
fn write_error(key: &str) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| match source.kind() {
        std::io::ErrorKind::IsADirectory
        | std::io::ErrorKind::NotADirectory
        | std::io::ErrorKind::AlreadyExists
        // Shown as "... already exists".
        | std::io::ErrorKind::DirectoryNotEmpty => {
            StoreError::Conflict(format!("a file or folder in the way of '{key}'"))
        }
        _ => io(key)(source),
    }
}

#[async_trait]
impl ObjectStore for LocalDirStore {
    async fn put_stream(&self, key: &str, mut body: ByteStream) -> Result<u64, StoreError> {
        let path = self.path(key)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(write_error(key))?;
        let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
        let result = async {
            let mut file = tokio::fs::File::create(&tmp).await.map_err(io(key))?;
            let mut size = 0u64;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(io(key))?;
                size += chunk.len() as u64;
                file.write_all(&chunk).await.map_err(io(key))?;
            }
            file.sync_all().await.map_err(io(key))?;
            tokio::fs::rename(&tmp, &path)
                .await
                .map_err(write_error(key))?;
            Ok(size)
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result
    }

    async fn get_stream(&self, key: &str) -> Result<ByteStream, StoreError> {
        let path = self.path(key)?;
        // A folder opens like a file on Linux and fails at the first read: it is no object.
        if tokio::fs::metadata(&path).await.is_ok_and(|m| !m.is_file()) {
            return Err(StoreError::ObjectNotFound(key.to_string()));
        }
        match tokio::fs::File::open(&path).await {
            Ok(file) => Ok(Box::pin(ReaderStream::with_capacity(file, 256 * 1024))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::ObjectNotFound(key.to_string()))
            }
            Err(e) => Err(io(key)(e)),
        }
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let path = self.path(key)?;
        match tokio::fs::metadata(&path).await {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(key)(e)),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path(key)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(key)(e)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        let root = self.root.clone();
        let prefix = prefix.to_string();
        let listed = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let mut stack = vec![root.clone()];
            while let Some(dir) = stack.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                for entry in entries {
                    let entry = entry?;
                    let meta = entry.metadata()?;
                    let path = entry.path();
                    if meta.is_dir() {
                        stack.push(path);
                    } else if let Ok(rel) = path.strip_prefix(&root) {
                        let key = rel.to_string_lossy().replace('\\', "/");
                        let hidden = key.split('/').any(|s| s.starts_with(".tmp-"));
                        if !hidden && key.starts_with(&prefix) {
                            out.push(ObjectInfo {
                                key,
                                size: meta.len(),
                            });
                        }
                    }
                }
            }
            out.sort_by(|a, b| a.key.cmp(&b.key));
            Ok(out)
        })
        .await
        .map_err(|e| StoreError::Io {
            key: self.root.display().to_string(),
            source: std::io::Error::other(e),
        })?;
        listed.map_err(|source| StoreError::Io {
            key: self.root.display().to_string(),
            source,
        })
    }

    async fn check(&self) -> Result<(), StoreError> {
        let meta = tokio::fs::metadata(&self.root)
            .await
            .map_err(io("<root>"))?;
        if !meta.is_dir() {
            return Err(StoreError::Io {
                key: self.root.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    "the object directory is not a directory",
                ),
            });
        }
        if meta.permissions().readonly() {
            return Err(StoreError::Io {
                key: self.root.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "object directory is read-only",
                ),
            });
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("local directory {}", self.root.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_path_that_is_both_file_and_folder_is_a_conflict() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalDirStore::open(dir.path()).await.expect("open");
        store
            .put_bytes("a/b", bytes::Bytes::from_static(b"x"))
            .await
            .expect("first file");
        // "a" is a folder now: a file there, or under the file "a/b", cannot be written.
        for key in ["a", "a/b/c"] {
            let err = store
                .put_bytes(key, bytes::Bytes::from_static(b"y"))
                .await
                .expect_err(key);
            assert!(matches!(err, StoreError::Conflict(_)), "{key}: {err:?}");
        }
        // A folder is no object.
        assert!(matches!(
            store.get_stream("a").await,
            Err(StoreError::ObjectNotFound(_))
        ));
        // What was there is intact, and no temporary file is left behind.
        let listed = store.list("").await.expect("list");
        let keys: Vec<&str> = listed.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["a/b"]);
    }
}
