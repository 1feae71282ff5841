//! Dashboard pages.
