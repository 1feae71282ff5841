//! Tenants, roles, API keys and quotas.

use serde::{Deserialize, Serialize};

/// What an API key may do inside its tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Manages the tenant's API keys, and everything a member does.
    Admin,
    /// Uses the platform: registers models, queries, jobs.
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
}

/// Per-tenant limits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quotas {
    /// Sustained requests per second across the tenant's API calls (burst = 2x).
    pub requests_per_second: f64,
    /// Registered models at most.
    pub max_models: i64,
    /// Bytes of model files, variants, validation sets and job data at most.
    pub max_stored_bytes: i64,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            requests_per_second: 200.0,
            max_models: 100,
            max_stored_bytes: 10 * 1024 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    pub id: String,
    pub name: String,
    pub created_at_ms: i64,
    pub quotas: Quotas,
}

/// A stored API key (the secret itself is never stored, only its hash).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    pub role: Role,
    /// The first characters of the key, to recognise it in listings.
    pub prefix: String,
    pub created_at_ms: i64,
    pub last_used_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

/// Tenant and application names: 1-64 characters of `[A-Za-z0-9._-]`, starting alphanumeric.
pub fn validate_name(kind: &str, name: &str) -> Result<(), String> {
    let ok_len = !name.is_empty() && name.len() <= 64;
    let ok_first = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok_len && ok_first && ok_chars {
        Ok(())
    } else {
        Err(format!(
            "{kind} name '{name}' is invalid: use 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("model", "digits-mlp-l").is_ok());
        assert!(validate_name("model", "a.b_c-1").is_ok());
        assert!(validate_name("model", "").is_err());
        assert!(validate_name("model", "-x").is_err());
        assert!(validate_name("model", "a/b").is_err());
        assert!(validate_name("model", &"x".repeat(65)).is_err());
        let msg = validate_name("application", "a b").unwrap_err();
        assert!(msg.contains("application name 'a b'"));
    }

    #[test]
    fn roles_round_trip() {
        for r in [Role::Admin, Role::Member] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("root"), None);
    }
}
