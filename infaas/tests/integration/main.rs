//! The integration suite of infaas, one binary: the HTTP API, dashboard, registry, serving,
//! the gRPC edge, jobs, autoscaling, CLI, SDK clients, deployment files and the workspace
//! layout, each a module. Fixtures come from the `infaas-testing` crate.

mod autoscaling;
mod browser;
mod cli;
mod compose;
mod dashboard_jobs;
mod dashboard_pipelines;
mod failover;
mod grpc;
mod http_auth;
mod http_basics;
mod http_contracts;
mod http_dashboard;
mod http_isolation;
mod http_lifecycle;
mod http_quota;
mod http_roles;
mod http_scaling;
mod jobs;
mod kubernetes_manifests;
mod layout;
mod openapi;
mod overload;
mod pipelines;
mod pruning;
mod real_models;
mod registry;
mod replicas;
mod sdk_clients;
mod serving;
mod sim_cli;
mod sim_overload;
mod simulated_gpu;
mod whatif;
