//! Paths as names: a file's short name in a report or a hint.

/// The last path component, for short names.
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
