//! Loading the ONNX Runtime shared library, once per process.
//!
//! `ort` is built with `load-dynamic`: nothing is linked at build time, and the library is
//! opened here from an explicit location. `ort::init()` without a library panics, so this
//! module is the only place that initialises `ort`, and it reports a missing library as an
//! error that says what to run.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;

/// The ONNX Runtime version whose shared library `scripts/setup.sh` installs.
pub const ORT_VERSION: &str = "1.31.1";

/// Environment variable naming the shared library (the same one `ort` itself reads).
pub const ORT_DYLIB_ENV: &str = "ORT_DYLIB_PATH";

/// Environment variable overriding the cache directory (default `$HOME/.cache/infaas`).
pub const CACHE_ENV: &str = "INFAAS_CACHE";

/// Why ONNX Runtime could not be initialised.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "the ONNX Runtime shared library was not found (looked at: {}); run `scripts/setup.sh` \
         to install it, or point {ORT_DYLIB_ENV} (or the runtime library option) at \
         libonnxruntime.so.{ORT_VERSION}",
        display_paths(.searched)
    )]
    NotFound { searched: Vec<PathBuf> },
    #[error(
        "could not load the ONNX Runtime shared library {}; run `scripts/setup.sh` to \
         reinstall ONNX Runtime {ORT_VERSION}",
        .path.display()
    )]
    Load {
        path: PathBuf,
        #[source]
        source: ort::LoadDynamicError,
    },
    #[error("could not create the ONNX Runtime environment")]
    Environment {
        #[source]
        source: ort::Error,
    },
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no candidate location: neither HOME nor INFAAS_CACHE is set".to_string();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

struct Runtime {
    path: PathBuf,
    environment: Environment,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
// Serialises first initialisation: `ort` allows one environment per process, and two racing
// callers must not both try to create it.
static INIT_LOCK: Mutex<()> = Mutex::new(());

/// Initialises ONNX Runtime once per process and returns the path of the library in use.
///
/// Looks, in order, at `explicit` (a configuration option), `$ORT_DYLIB_PATH`, and
/// `$INFAAS_CACHE` (or `$HOME/.cache/infaas`) +
/// `/ort/1.31.1/onnxruntime/capi/libonnxruntime.so.1.31.1`.
/// Later calls return the library chosen by the first successful call, whatever they pass.
/// When no library is found the error says to run `scripts/setup.sh`.
pub fn init_runtime(explicit: Option<&Path>) -> Result<PathBuf, RuntimeError> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt.path.clone());
    }
    // A poisoned lock only means another initialiser panicked; the OnceLock is still sound.
    let _guard = INIT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt.path.clone());
    }

    let candidates = candidate_paths(
        explicit,
        std::env::var_os(ORT_DYLIB_ENV).map(PathBuf::from),
        std::env::var_os(CACHE_ENV).map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    );
    if let Some(p) = explicit.filter(|p| !p.is_file()) {
        tracing::warn!(
            library = %p.display(),
            "configured ONNX Runtime library does not exist; trying the other locations"
        );
    }
    let path = candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| RuntimeError::NotFound {
            searched: candidates.clone(),
        })?;

    let builder = ort::init_from(&path).map_err(|source| RuntimeError::Load {
        path: path.clone(),
        source,
    })?;
    let environment = builder
        .with_name("infaas")
        .with_telemetry(false)
        .build()
        .map_err(|source| RuntimeError::Environment { source })?;
    tracing::info!(library = %path.display(), "ONNX Runtime initialised");

    let rt = RUNTIME.get_or_init(|| Runtime { path, environment });
    Ok(rt.path.clone())
}

/// The process-wide environment, initialising the runtime from the default locations if no
/// one has done so yet.
pub(crate) fn environment() -> Result<&'static Environment, RuntimeError> {
    init_runtime(None)?;
    match RUNTIME.get() {
        Some(rt) => Ok(&rt.environment),
        // init_runtime only returns Ok after RUNTIME is set.
        None => Err(RuntimeError::NotFound {
            searched: Vec::new(),
        }),
    }
}

/// The default location `scripts/setup.sh` fills, under a cache directory.
pub fn default_library_path(cache_dir: &Path) -> PathBuf {
    cache_dir
        .join("ort")
        .join(ORT_VERSION)
        .join("onnxruntime")
        .join("capi")
        .join(format!("libonnxruntime.so.{ORT_VERSION}"))
}

fn candidate_paths(
    explicit: Option<&Path>,
    env_dylib: Option<PathBuf>,
    env_cache: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Vec<PathBuf> {
    let cache = env_cache
        .filter(|p| !p.as_os_str().is_empty())
        .or_else(|| home.map(|h| h.join(".cache").join("infaas")));
    explicit
        .map(Path::to_path_buf)
        .into_iter()
        .chain(env_dylib.filter(|p| !p.as_os_str().is_empty()))
        .chain(cache.map(|c| default_library_path(&c)))
        .collect()
}

/// Whether sessions can run on a CUDA GPU: the crate was built with feature `cuda`, ONNX
/// Runtime loads, and the CUDA execution provider registers (it needs a GPU and the CUDA
/// libraries). Without feature `cuda` this is always `false`.
pub fn gpu_available() -> bool {
    #[cfg(feature = "cuda")]
    {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        *AVAILABLE.get_or_init(probe_cuda)
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

#[cfg(feature = "cuda")]
fn probe_cuda() -> bool {
    use ort::ep::ExecutionProvider;

    let Ok(env) = environment() else {
        return false;
    };
    if !matches!(ort::ep::CUDA::is_available(), Ok(true)) {
        return false;
    }
    // Compiled-in support is not enough: registration fails without a device or CUDA libraries.
    match ort::session::Session::builder(env) {
        Ok(mut builder) => ort::ep::CUDA::default().register(&mut builder).is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_the_documented_order() {
        let got = candidate_paths(
            Some(Path::new("/opt/ort.so")),
            Some(PathBuf::from("/env/ort.so")),
            None,
            Some(PathBuf::from("/home/u")),
        );
        assert_eq!(
            got,
            vec![
                PathBuf::from("/opt/ort.so"),
                PathBuf::from("/env/ort.so"),
                PathBuf::from(
                    "/home/u/.cache/infaas/ort/1.31.1/onnxruntime/capi/libonnxruntime.so.1.31.1"
                ),
            ]
        );
    }

    #[test]
    fn cache_variable_overrides_home() {
        let got = candidate_paths(
            None,
            Some(PathBuf::new()),
            Some(PathBuf::from("/cache")),
            Some(PathBuf::from("/home/u")),
        );
        assert_eq!(
            got,
            vec![PathBuf::from(
                "/cache/ort/1.31.1/onnxruntime/capi/libonnxruntime.so.1.31.1"
            )]
        );
    }

    #[test]
    fn missing_library_says_what_to_run() {
        let err = RuntimeError::NotFound {
            searched: vec![PathBuf::from("/nowhere/libonnxruntime.so")],
        };
        let msg = err.to_string();
        assert!(msg.contains("scripts/setup.sh"), "{msg}");
        assert!(msg.contains("/nowhere/libonnxruntime.so"), "{msg}");
        assert!(msg.contains("ORT_DYLIB_PATH"), "{msg}");
    }
}
