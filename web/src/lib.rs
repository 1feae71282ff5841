//! Server-rendered pages of infaas (askama). Pages take plain view structs; the HTTP layer
//! fills them.

/// Rendering of every page (re-exported so that the HTTP layer needs no askama of its own).
pub use askama::Template;

pub mod chart;
pub mod dashboard;
pub mod format;
pub mod pipelines;
pub mod whatif;

/// The dashboard's stylesheet, served by the binary.
pub const DASHBOARD_CSS: &str = include_str!("../assets/dashboard.css");
/// The dashboard's script (live refresh of marked elements), served by the binary.
pub const DASHBOARD_JS: &str = include_str!("../assets/dashboard.js");

/// The landing page: what this server is connected to and whether it is healthy.
#[derive(Template)]
#[template(path = "index.html")]
pub struct IndexPage {
    pub version: String,
    pub database_kind: String,
    pub database_ok: bool,
    pub database_status: String,
    pub object_store: String,
    pub object_store_ok: bool,
    pub object_store_status: String,
    pub runtime_ok: bool,
    pub runtime: String,
}

impl IndexPage {
    /// The page as HTML.
    pub fn render_html(&self) -> Result<String, askama::Error> {
        self.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_escapes_and_shows_status() {
        let page = IndexPage {
            version: "1.2.3".into(),
            database_kind: "sqlite".into(),
            database_ok: true,
            database_status: "ok".into(),
            object_store: "<script>x</script>".into(),
            object_store_ok: false,
            object_store_status: "unreachable".into(),
            runtime_ok: true,
            runtime: "/lib/libonnxruntime.so".into(),
        };
        let html = page.render_html().unwrap();
        assert!(html.contains("version 1.2.3"));
        assert!(html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"));
        assert!(!html.contains("<script>x"));
        assert!(html.contains("class=\"bad\">unreachable"));
    }
}
