//! `infaas admin ...`: operator commands that work on the configured database directly,
//! without a running server.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use infaas_core::{validate_name, Quotas, Role};
use infaas_store::Db;

use infaas_control::config::{Config, LogFormat, Overrides};
use infaas_control::tenancy::generate_key;

/// The configuration `admin` reads: where the database is (and the file's default quotas),
/// the cluster token, the log. The same flags and variables as `serve`'s.
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// TOML configuration file (the server's).
    #[arg(long, env = "INFAAS_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Data directory; the database is `DATA_DIR/infaas.db` unless --database-url is given.
    #[arg(long, env = "INFAAS_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// The database, `sqlite://...` or `postgres://...`.
    #[arg(long, env = "INFAAS_DATABASE_URL", global = true)]
    pub database_url: Option<String>,
    /// The cluster token `cluster-token` prints (default: the one stored in the database).
    #[arg(
        long,
        env = "INFAAS_CLUSTER_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub cluster_token: Option<String>,
    #[arg(long, env = "INFAAS_LOG_FORMAT", global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    #[arg(long, env = "INFAAS_LOG_LEVEL", global = true)]
    pub log_level: Option<String>,
}

impl AdminArgs {
    /// The server configuration's layers with these flags.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            config: self.config.clone(),
            data_dir: self.data_dir.clone(),
            database_url: self.database_url.clone(),
            cluster_token: self.cluster_token.clone(),
            log_format: self.log_format,
            log_level: self.log_level.clone(),
            ..Overrides::default()
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Creates a tenant and prints its first admin API key (shown once).
    CreateTenant {
        name: String,
        /// Requests per second (default from the configuration).
        #[arg(long)]
        rps: Option<f64>,
        /// Models at most.
        #[arg(long)]
        max_models: Option<i64>,
        /// Stored bytes at most.
        #[arg(long)]
        max_stored_bytes: Option<i64>,
    },
    /// Lists tenants and their quotas.
    ListTenants,
    /// Creates another API key for a tenant and prints it (shown once).
    CreateApiKey {
        tenant: String,
        #[arg(long, default_value = "member")]
        role: String,
        #[arg(long, default_value = "cli")]
        name: String,
    },
    /// Prints the cluster token that worker processes need (`infaas worker --cluster-token`).
    ClusterToken,
    /// Changes a tenant's quotas.
    SetQuotas {
        tenant: String,
        #[arg(long)]
        rps: Option<f64>,
        #[arg(long)]
        max_models: Option<i64>,
        #[arg(long)]
        max_stored_bytes: Option<i64>,
    },
}

pub async fn run(config: &Config, cmd: AdminCommand) -> anyhow::Result<()> {
    let url = config.database_url();
    let db = Db::connect(&url)
        .await
        .with_context(|| format!("connecting to {}", infaas_store::db::redact(&url)))?;
    let result = run_on(&db, config, cmd).await;
    db.close().await;
    result
}

async fn run_on(db: &Db, config: &Config, cmd: AdminCommand) -> anyhow::Result<()> {
    match cmd {
        AdminCommand::CreateTenant {
            name,
            rps,
            max_models,
            max_stored_bytes,
        } => {
            validate_name("tenant", &name).map_err(anyhow::Error::msg)?;
            let d = config.default_quotas;
            let quotas = Quotas {
                requests_per_second: rps.unwrap_or(d.requests_per_second),
                max_models: max_models.unwrap_or(d.max_models),
                max_stored_bytes: max_stored_bytes.unwrap_or(d.max_stored_bytes),
            };
            let tenant = db.create_tenant(&name, quotas).await?;
            let key = generate_key();
            db.create_api_key(&tenant.id, "admin", Role::Admin, &key.prefix, &key.hash)
                .await?;
            eprintln!("created tenant '{}' ({})", tenant.name, tenant.id);
            eprintln!("its admin API key (shown once; keep it safe):");
            println!("{}", key.secret);
        }
        AdminCommand::ClusterToken => {
            println!(
                "{}",
                infaas_control::platform::cluster_token(config, db).await?
            );
        }
        AdminCommand::ListTenants => {
            println!(
                "{:<24} {:<36} {:>8} {:>10} {:>14}",
                "NAME", "ID", "RPS", "MODELS", "BYTES"
            );
            for t in db.list_tenants().await? {
                println!(
                    "{:<24} {:<36} {:>8} {:>10} {:>14}",
                    t.name,
                    t.id,
                    t.quotas.requests_per_second,
                    t.quotas.max_models,
                    t.quotas.max_stored_bytes
                );
            }
        }
        AdminCommand::CreateApiKey { tenant, role, name } => {
            let role = Role::parse(&role)
                .with_context(|| format!("role must be 'admin' or 'member', not '{role}'"))?;
            let t = db.get_tenant_by_name(&tenant).await?;
            let key = generate_key();
            db.create_api_key(&t.id, &name, role, &key.prefix, &key.hash)
                .await?;
            println!("{}", key.secret);
        }
        AdminCommand::SetQuotas {
            tenant,
            rps,
            max_models,
            max_stored_bytes,
        } => {
            let t = db.get_tenant_by_name(&tenant).await?;
            let q = Quotas {
                requests_per_second: rps.unwrap_or(t.quotas.requests_per_second),
                max_models: max_models.unwrap_or(t.quotas.max_models),
                max_stored_bytes: max_stored_bytes.unwrap_or(t.quotas.max_stored_bytes),
            };
            db.set_tenant_quotas(&t.id, q).await?;
            eprintln!("quotas of '{tenant}' set to {q:?}");
        }
    }
    Ok(())
}
