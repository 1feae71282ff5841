//! Pipelines: DAGs of applications, models and combiners under one end-to-end SLO.
//!
//! State, which imports no operation of this module (the control plane holds it):
//! - [`prepared`]: a registered pipeline ([`Pipeline`]) and its checked copy ([`Prepared`]);
//! - [`installed`]: the accuracy-scaling allocation queries are routed by;
//! - [`tuners`]: the tuners of the pipelines planned here;
//! - [`activity`]: what the pipelines did recently (arrivals, branches, latencies, drops,
//!   cost, measured accuracies), in memory for the planner, the loops and the dashboard.
//!
//! Pure checks: [`validate`] (the document against the registry, tensors connect, the tree
//! accuracy scaling needs) and [`rows`] (which rows each node runs on, the combiners).
//!
//! Operations, above them:
//! - [`registered`]: registering, reading and deleting pipelines, and the checked copy;
//! - [`run`]: serving a query through the DAG, independent branches in parallel, each model
//!   node through the platform's query path (model-less for application nodes);
//! - [`replicas`]: loading and unloading replicas of planned variants on the cluster;
//! - [`accuracy`]: validation sets and the end-to-end accuracy measured on them;
//! - [`plan`]: InferLine's planner over the nodes' profiled variants, judged by the simulator;
//! - [`tune`]: InferLine's tuner, once a second, on the pipelines planned here;
//! - [`overload`]: Loki's accuracy scaling and early dropping;
//! - [`status`]: the live picture of a pipeline for the API and the dashboard.
//!
//! Inside this module an operation names the file it takes from (`super::prepared::Prepared`),
//! never this module's re-exports, which are for the crates above.

pub mod accuracy;
pub mod activity;
pub mod installed;
pub mod overload;
pub mod plan;
pub mod prepared;
pub mod registered;
pub mod replicas;
pub mod rows;
pub mod run;
pub mod status;
pub mod tune;
pub mod tuners;
pub mod validate;

pub use activity::{PipelineActivity, RecentFigures};
pub use prepared::{Pipeline, Prepared, SignatureTensor};
pub use registered::{create, delete, get, list, parse_document, prepared, MAX_DOCUMENT_BYTES};
