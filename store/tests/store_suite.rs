//! The store suite, written once and run on both backend pairs (see `infaas_testing::backends`):
//! `sqlite_local::*` on SQLite + a local directory, `postgres_s3::*` on Postgres + S3.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

mod common;

use bytes::Bytes;
use infaas_core::{DeclaredMetadata, FileKind, HardwareKind, LatencyPoint, Quotas, Role};
use infaas_store::{
    Db, DbKind, NewChunk, NewJob, NewModel, NewScalingEvent, NewVariant, ObjectRecord, PruneMark,
    PrunedVariant, StoreError, UsageRow,
};

use common::backends::{on_both_pairs, Backends};
use common::{generated_stream, open, stream_digest, Stores};

on_both_pairs!(
    migrations_apply_once,
    tenants,
    api_keys,
    settings_first_writer_wins,
    object_accounting,
    object_round_trips,
    invalid_keys_are_rejected,
    streamed_upload_over_10_mb,
    failed_upload_leaves_nothing,
    job_chunks_count_once,
    usage_keeps_the_slo_range,
    scaling_events_by_app,
    whatif_runs_keep_their_state,
    pipelines_are_per_tenant,
    pruned_variants_leave_the_lists_and_serving,
    leases_elect_one_holder_and_fence_a_deposed_one,
    arrival_reports_reach_the_other_replicas,
);

const MIB: usize = 1024 * 1024;

fn quotas(rps: f64, models: i64, bytes: i64) -> Quotas {
    Quotas {
        requests_per_second: rps,
        max_models: models,
        max_stored_bytes: bytes,
    }
}

async fn migrations_apply_once(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let expected = if b.is_embedded() {
        DbKind::Sqlite
    } else {
        DbKind::Postgres
    };
    assert_eq!(db.kind(), expected);
    if let Some(schema) = &b.schema {
        // The URL's `options` really put this test in a schema of its own.
        let current: String = sqlx::query_scalar("SELECT CAST(current_schema() AS TEXT)")
            .fetch_one(db.pool())
            .await
            .unwrap();
        assert_eq!(&current, schema);
    }
    let applied = db.applied_migrations().await.unwrap();
    assert!(!applied.is_empty(), "no migration was applied");
    assert!(applied.windows(2).all(|w| w[0] < w[1]), "{applied:?}");
    let tenant = db
        .create_tenant("survivor", Quotas::default())
        .await
        .unwrap();
    db.close().await;

    // A second connection finds everything applied: same migrations, data untouched.
    let again = Db::connect(&b.database_url).await.unwrap();
    assert_eq!(again.applied_migrations().await.unwrap(), applied);
    assert_eq!(again.get_tenant(&tenant.id).await.unwrap(), tenant);
    again.ping().await.unwrap();
    again.close().await;
}

async fn tenants(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let beta = db
        .create_tenant("beta", quotas(5.0, 3, 1000))
        .await
        .unwrap();
    let acme = db.create_tenant("acme", Quotas::default()).await.unwrap();
    assert_eq!(db.get_tenant(&beta.id).await.unwrap(), beta);
    assert_eq!(db.get_tenant_by_name("acme").await.unwrap(), acme);
    assert_eq!(beta.quotas, quotas(5.0, 3, 1000));

    let names: Vec<String> = db
        .list_tenants()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["acme", "beta"]);

    match db.create_tenant("acme", Quotas::default()).await {
        Err(StoreError::Conflict(what)) => assert!(what.contains("acme"), "{what}"),
        other => panic!("duplicate tenant name: expected Conflict, got {other:?}"),
    }
    assert!(matches!(
        db.get_tenant("no-such-id").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        db.get_tenant_by_name("nobody").await,
        Err(StoreError::NotFound(_))
    ));

    db.set_tenant_quotas(&acme.id, quotas(2.0, 1, 10))
        .await
        .unwrap();
    assert_eq!(
        db.get_tenant(&acme.id).await.unwrap().quotas,
        quotas(2.0, 1, 10)
    );
    assert!(matches!(
        db.set_tenant_quotas("no-such-id", Quotas::default()).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn api_keys(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let a = db.create_tenant("a", Quotas::default()).await.unwrap();
    let other = db.create_tenant("b", Quotas::default()).await.unwrap();
    let hash = "ab".repeat(32);
    let key = db
        .create_api_key(&a.id, "admin", Role::Admin, "infaas_abcdef", &hash)
        .await
        .unwrap();
    assert_eq!(
        (key.role, key.last_used_at_ms, key.revoked_at_ms),
        (Role::Admin, None, None)
    );

    let found = db.find_active_api_key(&hash).await.unwrap().expect("found");
    assert_eq!(
        (found.id.as_str(), found.tenant_id.as_str()),
        (key.id.as_str(), a.id.as_str())
    );
    assert!(db
        .find_active_api_key(&"cd".repeat(32))
        .await
        .unwrap()
        .is_none());
    // Finding a key marks it used.
    let listed = db.list_api_keys(&a.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].last_used_at_ms.is_some());

    match db
        .create_api_key(&other.id, "dup", Role::Member, "infaas_abcdef", &hash)
        .await
    {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("duplicate key hash: expected Conflict, got {other:?}"),
    }
    let member = db
        .create_api_key(&a.id, "ci", Role::Member, "infaas_zzzzzz", &"ef".repeat(32))
        .await
        .unwrap();
    assert_eq!(db.count_active_admin_keys(&a.id).await.unwrap(), 1);

    assert!(db.api_key_active(&a.id, &key.id).await.unwrap());
    // Another tenant's key is neither active for it nor revocable by it.
    assert!(!db.api_key_active(&other.id, &key.id).await.unwrap());
    assert!(db.list_api_keys(&other.id).await.unwrap().is_empty());
    assert!(matches!(
        db.revoke_api_key(&other.id, &key.id).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(db.api_key_active(&a.id, &key.id).await.unwrap());

    let revoked = db.revoke_api_key(&a.id, &member.id).await.unwrap();
    assert!(revoked.revoked_at_ms.is_some());
    assert!(!db.api_key_active(&a.id, &member.id).await.unwrap());
    assert!(db
        .find_active_api_key(&"ef".repeat(32))
        .await
        .unwrap()
        .is_none());
    assert!(matches!(
        db.revoke_api_key(&a.id, &member.id).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        db.revoke_api_key(&a.id, "no-such-key").await,
        Err(StoreError::NotFound(_))
    ));
    let ids: Vec<String> = db
        .list_api_keys(&a.id)
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(ids.len(), 2, "revoked keys stay listed");
}

async fn settings_first_writer_wins(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    assert_eq!(db.get_setting("color").await.unwrap(), None);
    assert_eq!(db.setting_or_insert("color", "red").await.unwrap(), "red");
    assert_eq!(db.setting_or_insert("color", "blue").await.unwrap(), "red");
    assert_eq!(
        db.get_setting("color").await.unwrap().as_deref(),
        Some("red")
    );

    // Racing writers (several controllers starting at once) all read the winner's value.
    let racers = (0..8).map(|i| {
        let db = db.clone();
        tokio::spawn(async move { db.setting_or_insert("secret", &format!("v{i}")).await })
    });
    let seen: Vec<String> = futures::future::join_all(racers)
        .await
        .into_iter()
        .map(|r| r.unwrap().unwrap())
        .collect();
    assert!(seen.iter().all(|v| v == &seen[0]), "{seen:?}");
    assert_eq!(
        db.get_setting("secret").await.unwrap(),
        Some(seen[0].clone())
    );
}

async fn object_accounting(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let a = db.create_tenant("a", Quotas::default()).await.unwrap();
    let other = db.create_tenant("b", Quotas::default()).await.unwrap();
    let rec = |key: &str, tenant: &str, size: i64, kind: &str, owner: &str| ObjectRecord {
        key: key.into(),
        tenant_id: tenant.into(),
        size_bytes: size,
        owner_kind: kind.into(),
        owner_id: owner.into(),
    };
    assert_eq!(db.stored_bytes(&a.id).await.unwrap(), 0);
    for r in [
        rec("t/a/m1/source.onnx", &a.id, 100, "model", "m1"),
        rec("t/a/m1/validation.npz", &a.id, 50, "model", "m1"),
        rec("t/a/v1/model.onnx", &a.id, 7, "variant", "v1"),
        rec(
            "t/b/m2/source.onnx",
            &other.id,
            3_000_000_000,
            "model",
            "m2",
        ),
    ] {
        db.record_object(&r).await.unwrap();
    }
    assert_eq!(db.stored_bytes(&a.id).await.unwrap(), 157);
    // Sums beyond 32 bits survive Postgres's NUMERIC sum.
    assert_eq!(db.stored_bytes(&other.id).await.unwrap(), 3_000_000_000);
    assert_eq!(db.stored_bytes("nobody").await.unwrap(), 0);

    let keys = |v: Vec<ObjectRecord>| v.into_iter().map(|r| r.key).collect::<Vec<_>>();
    assert_eq!(
        keys(db.objects_of("model", "m1").await.unwrap()),
        ["t/a/m1/source.onnx", "t/a/m1/validation.npz"]
    );
    assert_eq!(
        db.objects_of("variant", "v1").await.unwrap(),
        [rec("t/a/v1/model.onnx", &a.id, 7, "variant", "v1")]
    );
    assert!(db.objects_of("model", "nothing").await.unwrap().is_empty());

    // Recording a key again replaces its size.
    db.record_object(&rec("t/a/m1/source.onnx", &a.id, 200, "model", "m1"))
        .await
        .unwrap();
    assert_eq!(db.stored_bytes(&a.id).await.unwrap(), 257);
    db.forget_object("t/a/m1/source.onnx").await.unwrap();
    db.forget_object("t/a/never-recorded").await.unwrap();
    assert_eq!(db.stored_bytes(&a.id).await.unwrap(), 57);
    assert_eq!(
        keys(db.objects_of("model", "m1").await.unwrap()),
        ["t/a/m1/validation.npz"]
    );
}

async fn object_round_trips(b: &Backends) {
    let Stores { objects, .. } = open(b).await;
    let put = |key: &'static str, body: &'static [u8]| {
        let objects = objects.clone();
        async move {
            assert_eq!(
                objects
                    .put_bytes(key, Bytes::from_static(body))
                    .await
                    .unwrap(),
                body.len() as u64
            );
        }
    };
    put("a/2", b"two").await;
    put("a/1", b"one").await;
    put("a/10", b"ten!").await;
    put("ab/1", b"").await;
    put("b/x.bin", b"\x00\x01\x02").await;

    assert_eq!(&objects.get_bytes("a/1").await.unwrap()[..], b"one");
    assert_eq!(&objects.get_bytes("ab/1").await.unwrap()[..], b"");
    assert_eq!(objects.head("a/10").await.unwrap(), Some(4));
    assert_eq!(objects.head("ab/1").await.unwrap(), Some(0));
    assert_eq!(objects.head("a/3").await.unwrap(), None);
    // A directory of the local store is not an object.
    assert_eq!(objects.head("a").await.unwrap(), None);

    // Writing a key again replaces the object.
    put("a/1", b"uno, replaced").await;
    assert_eq!(
        &objects.get_bytes("a/1").await.unwrap()[..],
        b"uno, replaced"
    );

    let listed = |prefix: &'static str| {
        let objects = objects.clone();
        async move {
            objects
                .list(prefix)
                .await
                .unwrap()
                .into_iter()
                .map(|o| (o.key, o.size))
                .collect::<Vec<_>>()
        }
    };
    let own = |v: &[(&str, u64)]| {
        v.iter()
            .map(|(k, s)| (k.to_string(), *s))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        listed("a/").await,
        own(&[("a/1", 13), ("a/10", 4), ("a/2", 3)])
    );
    // Prefixes are plain string prefixes, not path segments.
    assert_eq!(
        listed("a").await,
        own(&[("a/1", 13), ("a/10", 4), ("a/2", 3), ("ab/1", 0)])
    );
    assert_eq!(listed("").await.len(), 5);
    assert!(listed("zzz/").await.is_empty());

    objects.delete("a/2").await.unwrap();
    assert_eq!(objects.head("a/2").await.unwrap(), None);
    objects.delete("a/2").await.unwrap();
    objects.delete("never/there").await.unwrap();
    match objects.get_bytes("a/2").await {
        Err(StoreError::ObjectNotFound(key)) => assert_eq!(key, "a/2"),
        other => panic!("get of a deleted object: expected ObjectNotFound, got {other:?}"),
    }
    assert!(matches!(
        objects.get_stream("never/there").await.map(|_| ()),
        Err(StoreError::ObjectNotFound(_))
    ));

    assert_eq!(objects.delete_prefix("a/").await.unwrap(), 2);
    assert_eq!(listed("").await, own(&[("ab/1", 0), ("b/x.bin", 3)]));
    assert_eq!(objects.delete_prefix("a/").await.unwrap(), 0);
    assert_eq!(objects.delete_prefix("").await.unwrap(), 2);
    assert!(listed("").await.is_empty());
    objects.check().await.unwrap();
    assert!(!objects.describe().is_empty());
}

async fn invalid_keys_are_rejected(b: &Backends) {
    let Stores { objects, .. } = open(b).await;
    let bad = |e: Result<(), StoreError>| matches!(e, Err(StoreError::InvalidKey { .. }));
    for key in [
        "",
        "../etc/passwd",
        "a/../../b",
        "/abs",
        "a//b",
        "a/",
        "a b",
        "a\\b",
        "ü",
        "a/./b",
    ] {
        assert!(
            bad(objects
                .put_bytes(key, Bytes::from_static(b"x"))
                .await
                .map(|_| ())),
            "put {key:?}"
        );
        assert!(bad(objects.get_bytes(key).await.map(|_| ())), "get {key:?}");
        assert!(bad(objects.head(key).await.map(|_| ())), "head {key:?}");
        assert!(bad(objects.delete(key).await), "delete {key:?}");
    }
    let long = "k".repeat(901);
    assert!(bad(objects.head(&long).await.map(|_| ())));
    assert!(
        objects.list("").await.unwrap().is_empty(),
        "nothing was written"
    );
}

async fn streamed_upload_over_10_mb(b: &Backends) {
    let Stores { objects, .. } = open(b).await;
    let total = 21 * MIB;
    let (body, expected) = generated_stream(total, MIB, 42);
    let key = "t/x/models/big/source.onnx";
    assert_eq!(objects.put_stream(key, body).await.unwrap(), total as u64);
    assert_eq!(objects.head(key).await.unwrap(), Some(total as u64));
    let listed = objects.list("t/x/").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].size, total as u64);

    let (size, digest, largest) = stream_digest(objects.as_ref(), key).await;
    assert_eq!(size, total as u64);
    assert_eq!(digest, expected, "read-back differs from what was written");
    assert!(largest < total, "the object came back as one buffer");

    // Replacing it with a small object works too (multipart -> single put).
    objects
        .put_bytes(key, Bytes::from_static(b"small"))
        .await
        .unwrap();
    assert_eq!(objects.head(key).await.unwrap(), Some(5));
    objects.delete(key).await.unwrap();
    assert_eq!(objects.head(key).await.unwrap(), None);
}

async fn failed_upload_leaves_nothing(b: &Backends) {
    use futures::StreamExt;
    let Stores { objects, .. } = open(b).await;
    // 10 MiB arrive, then the body fails: past the first S3 part, so a multipart upload
    // has begun and must be aborted; locally the temporary file must go.
    let (good, _) = generated_stream(10 * MIB, MIB, 7);
    let failing = good.chain(futures::stream::once(async {
        Err(std::io::Error::other("client went away"))
    }));
    let key = "t/x/models/broken/source.onnx";
    match objects.put_stream(key, Box::pin(failing)).await {
        Err(StoreError::Io { key: k, .. }) => assert_eq!(k, key),
        other => panic!("a failing body: expected an Io error, got {other:?}"),
    }
    assert_eq!(objects.head(key).await.unwrap(), None);
    assert!(objects.list("").await.unwrap().is_empty());
    if b.is_embedded() {
        // No temporary file left behind in the directory either.
        let leftovers: Vec<_> = walk(std::path::Path::new(&b.object_store));
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

async fn job_chunks_count_once(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let t = db
        .create_tenant("acme", quotas(10.0, 10, 1 << 20))
        .await
        .unwrap();
    let other = db
        .create_tenant("other", quotas(10.0, 10, 1 << 20))
        .await
        .unwrap();
    let chunk = |key: &str, start: i64, items: i64| NewChunk {
        input_key: key.into(),
        format: "npz".into(),
        row_start: start,
        items,
    };
    let job = db
        .create_job(
            &t.id,
            &NewJob {
                app: Some("digits".into()),
                model: None,
                pipeline: None,
                min_accuracy: Some(0.9),
                input_path: "in/".into(),
                output_path: "out/".into(),
                webhook_url: None,
            },
            &[chunk("a", 0, 100), chunk("a", 100, 50), chunk("b", 0, 7)],
        )
        .await
        .unwrap();
    assert_eq!(
        (job.state.as_str(), job.items_total, job.items_done),
        ("queued", 157, 0)
    );
    // Another tenant cannot see it.
    assert!(matches!(
        db.get_job(&other.id, &job.id).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(db.list_jobs(&other.id).await.unwrap().is_empty());

    // Chunks are claimed in order, once each, with their global item offsets.
    let c0 = db
        .claim_chunk(&job.id, "w1", 60_000)
        .await
        .unwrap()
        .unwrap();
    let c1 = db
        .claim_chunk(&job.id, "w2", 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (c0.index, c0.item_start, c1.index, c1.item_start),
        (0, 0, 1, 100)
    );
    assert_eq!((c1.row_start, c1.items), (100, 50));
    // Completing counts the items once; a second completion is refused.
    assert!(db.complete_chunk(&job.id, 0, "out/0").await.unwrap());
    assert!(!db.complete_chunk(&job.id, 0, "out/0").await.unwrap());
    assert_eq!(db.get_job(&t.id, &job.id).await.unwrap().items_done, 100);
    // A released chunk is claimed again; an expired lease lets another runner take it.
    db.release_chunk(&job.id, 1).await.unwrap();
    let again = db.claim_chunk(&job.id, "w3", -1).await.unwrap().unwrap();
    assert_eq!((again.index, again.attempts), (1, 2));
    let stolen = db
        .claim_chunk(&job.id, "w4", 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((stolen.index, stolen.attempts), (1, 3));
    let c2 = db
        .claim_chunk(&job.id, "w4", 60_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c2.index, 2);
    assert!(db
        .claim_chunk(&job.id, "w5", 60_000)
        .await
        .unwrap()
        .is_none());
    assert!(db.complete_chunk(&job.id, 1, "out/1").await.unwrap());
    assert!(db.complete_chunk(&job.id, 2, "out/2").await.unwrap());
    let counts = db.chunk_counts(&job.id).await.unwrap();
    assert_eq!((counts.pending, counts.running, counts.done), (0, 0, 3));
    assert_eq!(db.get_job(&t.id, &job.id).await.unwrap().items_done, 157);

    // States: final states stick.
    assert!(db
        .set_job_state(&job.id, "running", None, None)
        .await
        .unwrap());
    assert!(db
        .set_job_state(&job.id, "succeeded", None, None)
        .await
        .unwrap());
    assert!(!db
        .set_job_state(&job.id, "running", None, None)
        .await
        .unwrap());
    let cancelled = db.cancel_job(&t.id, &job.id).await.unwrap();
    assert_eq!(cancelled.state, "succeeded");
    let j = db.get_job(&t.id, &job.id).await.unwrap();
    assert!(j.started_at.is_some() && j.finished_at.is_some());
    assert!(db
        .unfinished_jobs()
        .await
        .unwrap()
        .iter()
        .all(|u| u.id != job.id));
}

fn usage_row(tenant: &str, app: &str, slo: (Option<f64>, Option<f64>)) -> UsageRow {
    UsageRow {
        tenant_id: tenant.into(),
        app: app.into(),
        model: "m".into(),
        variant: "m.fp32.cpu.t1.b1".into(),
        hardware: "cpu".into(),
        minute: 120_000,
        requests: 1,
        rows: 1,
        slo_met: 1,
        slo_missed: 0,
        latency_sum_ms: 2.0,
        latency_max_ms: 2.0,
        cost: 0.5,
        slo_min_ms: slo.0,
        slo_max_ms: slo.1,
    }
}

/// Aggregates of one minute keep the tightest and loosest SLO across flushes (a flush
/// without SLOs changes neither), and tenant-wide reads see only that tenant.
async fn usage_keeps_the_slo_range(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let acme = db.create_tenant("acme", Quotas::default()).await.unwrap();
    let beta = db.create_tenant("beta", Quotas::default()).await.unwrap();
    for slo in [
        (Some(5.0), Some(10.0)),
        (None, None),
        (Some(2.0), Some(4.0)),
        (Some(8.0), Some(20.0)),
    ] {
        db.add_usage(&[usage_row(&acme.id, "digits", slo)])
            .await
            .unwrap();
    }
    db.add_usage(&[usage_row(&beta.id, "other", (Some(1.0), Some(1.0)))])
        .await
        .unwrap();
    let rows = db.usage(&acme.id, "digits", 0).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].requests, 4);
    assert_eq!(
        (rows[0].slo_min_ms, rows[0].slo_max_ms),
        (Some(2.0), Some(20.0))
    );
    let all = db.tenant_usage(&acme.id, 0).await.unwrap();
    assert_eq!(all, rows);
    // A row that never had an SLO reads back as none.
    db.add_usage(&[usage_row(&acme.id, "plain", (None, None))])
        .await
        .unwrap();
    let plain = db.usage(&acme.id, "plain", 0).await.unwrap();
    assert_eq!((plain[0].slo_min_ms, plain[0].slo_max_ms), (None, None));
    assert_eq!(db.tenant_usage(&beta.id, 0).await.unwrap().len(), 1);
    assert!(db.tenant_usage(&acme.id, 200_000).await.unwrap().is_empty());
}

async fn scaling_events_by_app(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let acme = db.create_tenant("acme", Quotas::default()).await.unwrap();
    let beta = db.create_tenant("beta", Quotas::default()).await.unwrap();
    for (id, tenant) in [("app-a", &acme.id), ("app-b", &beta.id)] {
        sqlx::query(
            "INSERT INTO applications (id, tenant_id, name, created_at) VALUES ($1, $2, 'digits', 0)",
        )
        .bind(id)
        .bind(tenant)
        .execute(db.pool())
        .await
        .unwrap();
    }
    let event = |tenant: &str, action: &str, at: i64| NewScalingEvent {
        tenant_id: Some(tenant.to_string()),
        app: Some("digits".into()),
        variant_id: Some("v-1".into()),
        worker: Some("worker-1".into()),
        action: action.into(),
        reason: format!("{action} because"),
        cost_before_per_s: 1.0,
        cost_after_per_s: 2.5,
        created_at_ms: at,
        fenced: true,
    };
    db.add_scaling_event(&event(&acme.id, "replicate", 1000))
        .await
        .unwrap();
    db.add_scaling_event(&event(&acme.id, "upgrade", 2000))
        .await
        .unwrap();
    db.add_scaling_event(&event(&beta.id, "downgrade", 1500))
        .await
        .unwrap();
    // An event of no tenant (a worker nobody's load asked for).
    db.add_scaling_event(&NewScalingEvent {
        tenant_id: None,
        app: None,
        variant_id: None,
        ..event(&acme.id, "add-worker", 1200)
    })
    .await
    .unwrap();

    let got = db
        .app_scaling_events(&acme.id, "digits", 0, 10)
        .await
        .unwrap();
    let actions: Vec<&str> = got.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        ["upgrade", "replicate"],
        "newest first, acme's only"
    );
    assert_eq!(got[0].app.as_deref(), Some("digits"));
    assert_eq!(got[0].variant.as_deref(), Some("v-1"));
    assert_eq!(got[0].worker_id.as_deref(), Some("worker-1"));
    assert_eq!(
        (got[0].cost_before_per_s, got[0].cost_after_per_s),
        (Some(1.0), Some(2.5))
    );
    assert_eq!(got[0].created_at_ms, 2000);
    // Since and limit.
    let since = db
        .app_scaling_events(&acme.id, "digits", 1500, 10)
        .await
        .unwrap();
    assert_eq!(since.len(), 1);
    assert_eq!(
        db.app_scaling_events(&acme.id, "digits", 0, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    // Another tenant's application of the same name, and an unknown application.
    let theirs = db
        .app_scaling_events(&beta.id, "digits", 0, 10)
        .await
        .unwrap();
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].action, "downgrade");
    assert!(db
        .app_scaling_events(&acme.id, "nope", 0, 10)
        .await
        .unwrap()
        .is_empty());
    // The dashboard's list shows the tenant's events with their application.
    let all = db.scaling_events(&acme.id, 10).await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|e| e.app.as_deref() == Some("digits")));
}

async fn whatif_runs_keep_their_state(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let acme = db.create_tenant("acme", Quotas::default()).await.unwrap();
    let beta = db.create_tenant("beta", Quotas::default()).await.unwrap();
    let first = db
        .create_whatif_run(&acme.id, r#"{"r":1}"#, "[]")
        .await
        .unwrap();
    assert_eq!(first.status, "queued");
    assert_eq!((first.started_at, first.finished_at), (None, None));
    let second = db
        .create_whatif_run(&acme.id, r#"{"r":2}"#, "[]")
        .await
        .unwrap();
    db.create_whatif_run(&beta.id, r#"{"r":3}"#, "[]")
        .await
        .unwrap();
    assert_eq!(db.unfinished_whatif_runs(&acme.id).await.unwrap(), 2);

    // Queued, running with progress, succeeded with a result that only `get` reads back.
    assert!(db.start_whatif_run(&first.id).await.unwrap());
    assert!(!db.start_whatif_run(&first.id).await.unwrap(), "once");
    assert!(db.set_whatif_progress(&first.id, "[1]").await.unwrap());
    assert!(db
        .finish_whatif_run(&first.id, "succeeded", "[2]", None, Some(r#"{"x":1}"#))
        .await
        .unwrap());
    assert!(
        !db.set_whatif_progress(&first.id, "[3]").await.unwrap(),
        "a final run does not change"
    );
    assert!(!db
        .finish_whatif_run(&first.id, "failed", "[3]", Some("late"), None)
        .await
        .unwrap());
    let got = db.get_whatif_run(&acme.id, &first.id, true).await.unwrap();
    assert_eq!(got.status, "succeeded");
    assert_eq!(got.progress, "[2]");
    assert_eq!(got.result.as_deref(), Some(r#"{"x":1}"#));
    assert_eq!(got.error, None);
    assert!(got.started_at.is_some() && got.finished_at.is_some());
    assert_eq!(
        db.get_whatif_run(&acme.id, &first.id, false)
            .await
            .unwrap()
            .result,
        None
    );
    assert_eq!(db.unfinished_whatif_runs(&acme.id).await.unwrap(), 1);

    // Listed newest first, per tenant, without results; another tenant's id is not found.
    let list = db.list_whatif_runs(&acme.id, 10).await.unwrap();
    let ids: Vec<&str> = list.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert!(list.iter().all(|r| r.result.is_none()));
    assert_eq!(db.list_whatif_runs(&acme.id, 1).await.unwrap().len(), 1);
    assert!(matches!(
        db.get_whatif_run(&beta.id, &first.id, true).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        db.delete_whatif_run(&beta.id, &first.id).await,
        Err(StoreError::NotFound(_))
    ));

    // At start, every unfinished run (all tenants) is failed with the reason.
    assert_eq!(
        db.fail_unfinished_whatif_runs("interrupted").await.unwrap(),
        2
    );
    let failed = db
        .get_whatif_run(&acme.id, &second.id, false)
        .await
        .unwrap();
    assert_eq!(failed.status, "failed");
    assert_eq!(failed.error.as_deref(), Some("interrupted"));
    assert!(failed.finished_at.is_some());
    assert_eq!(db.unfinished_whatif_runs(&beta.id).await.unwrap(), 0);
    assert!(!db.start_whatif_run(&second.id).await.unwrap());

    db.delete_whatif_run(&acme.id, &first.id).await.unwrap();
    assert!(matches!(
        db.get_whatif_run(&acme.id, &first.id, true).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(db.list_whatif_runs(&acme.id, 10).await.unwrap().len(), 1);
}

async fn pipelines_are_per_tenant(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let acme = db.create_tenant("acme", Quotas::default()).await.unwrap();
    let beta = db.create_tenant("beta", Quotas::default()).await.unwrap();
    let p = db
        .create_pipeline(&acme.id, "cascade", r#"{"name":"cascade"}"#, Some(50.0))
        .await
        .unwrap();
    assert_eq!((p.name.as_str(), p.plan.as_deref()), ("cascade", None));
    assert_eq!(p.validation_key, None);
    // Names are unique per tenant, not across tenants.
    assert!(matches!(
        db.create_pipeline(&acme.id, "cascade", "{}", None).await,
        Err(StoreError::Conflict(_))
    ));
    db.create_pipeline(&beta.id, "cascade", "{}", None)
        .await
        .unwrap();
    db.set_pipeline_plan(&acme.id, "cascade", Some(r#"{"cost":1}"#))
        .await
        .unwrap();
    let got = db.get_pipeline(&acme.id, "cascade").await.unwrap();
    assert_eq!(got.plan.as_deref(), Some(r#"{"cost":1}"#));
    assert_eq!(db.list_pipelines(&acme.id).await.unwrap().len(), 1);
    assert_eq!(db.all_pipelines().await.unwrap().len(), 2);
    // Another tenant's pipeline is not found, for reads, plans and deletes.
    let other = db.get_pipeline(&beta.id, "cascade").await.unwrap();
    assert_eq!(other.plan, None);
    assert!(matches!(
        db.set_pipeline_plan(&beta.id, "missing", None).await,
        Err(StoreError::NotFound(_))
    ));
    // A validation set: recorded, replaced (the old key comes back to be deleted), removed.
    let set = |k: &'static str| Some((k, "probs", 540));
    assert_eq!(
        db.set_pipeline_validation(&acme.id, "cascade", set("v1"))
            .await
            .unwrap(),
        None
    );
    let got = db.get_pipeline(&acme.id, "cascade").await.unwrap();
    assert_eq!(
        (
            got.validation_key.as_deref(),
            got.validation_output.as_deref(),
            got.validation_rows
        ),
        (Some("v1"), Some("probs"), Some(540))
    );
    assert_eq!(
        db.set_pipeline_validation(&acme.id, "cascade", set("v2"))
            .await
            .unwrap()
            .as_deref(),
        Some("v1")
    );
    assert!(matches!(
        db.set_pipeline_validation(&beta.id, "missing", set("v3"))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        db.get_pipeline(&beta.id, "cascade")
            .await
            .unwrap()
            .validation_key,
        None
    );
    assert_eq!(
        db.set_pipeline_validation(&acme.id, "cascade", None)
            .await
            .unwrap()
            .as_deref(),
        Some("v2")
    );
    assert_eq!(
        db.get_pipeline(&acme.id, "cascade")
            .await
            .unwrap()
            .validation_rows,
        None
    );
    let gone = db.delete_pipeline(&acme.id, "cascade").await.unwrap();
    assert_eq!(gone.id, p.id);
    assert!(matches!(
        db.get_pipeline(&acme.id, "cascade").await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(db.list_pipelines(&beta.id).await.unwrap().len(), 1);
}

/// A registration that ends by pruning: the pruned variants leave `list_variants` and the
/// serving catalog, `list_pruned_variants` has them with their reasons, and the model is
/// ready with the report, all in one step.
async fn pruned_variants_leave_the_lists_and_serving(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    let t = db.create_tenant("acme", Quotas::default()).await.unwrap();
    let model = db
        .create_model(
            &t.id,
            &NewModel {
                id: uuid::Uuid::new_v4().to_string(),
                name: "m".into(),
                app: "digits".into(),
                task: "classification".into(),
                source_key: "k/source.onnx".into(),
                validation_key: "k/validation.npz".into(),
                size_bytes: 10,
                sha256: "00".into(),
                declared: DeclaredMetadata::default(),
                signature: serde_json::json!({"inputs": [], "outputs": []}),
            },
        )
        .await
        .unwrap();
    let mut new = Vec::new();
    for (kind, acc) in [(FileKind::Optimized, 1.0), (FileKind::Int8, 0.379)] {
        let key = format!("k/{}.onnx", kind.as_str());
        let f = db
            .upsert_model_file(&t.id, &model.id, kind, &key, 10)
            .await
            .unwrap();
        db.set_file_accuracy(&f.id, acc).await.unwrap();
        for threads in [1, 2] {
            new.push(NewVariant {
                name: infaas_core::Variant::make_name("m", kind, HardwareKind::Cpu, threads, 1),
                file_id: f.id.clone(),
                kind,
                hardware: HardwareKind::Cpu,
                threads,
                max_batch: 1,
            });
        }
    }
    db.ensure_variants(&t.id, &model.id, &new).await.unwrap();
    let point = LatencyPoint {
        batch: 1,
        p50_ms: 1.0,
        p99_ms: 2.0,
        mean_ms: 1.0,
        throughput_per_s: 1000.0,
    };
    for f in db.list_model_files(&model.id).await.unwrap() {
        for threads in [1, 2] {
            db.record_profile(&f.id, HardwareKind::Cpu, threads, 5.0, 100, &[point])
                .await
                .unwrap();
        }
    }
    let all = db.list_variants(&model.id).await.unwrap();
    assert_eq!(all.len(), 4);
    let int8: Vec<_> = all
        .iter()
        .filter(|v| v.file_kind == FileKind::Int8)
        .collect();
    let reason = "accuracy 0.379 <= 1.000 of opt, not faster at any batch";
    let marks: Vec<PruneMark> = int8
        .iter()
        .map(|v| PruneMark {
            variant_id: v.id.clone(),
            dominated_by: v.name.replace(".int8.", ".opt."),
            reason: reason.into(),
        })
        .collect();
    // Still registering: nothing is served.
    assert!(db.serving_catalog().await.unwrap().is_empty());
    let detail = format!("ready; pruned int8 ({reason})");
    db.finish_registration(&model.id, &marks, &detail)
        .await
        .unwrap();

    let m = db.get_model(&t.id, "m").await.unwrap();
    assert_eq!(m.status, infaas_core::ModelStatus::Ready);
    assert_eq!(m.progress, 1.0);
    assert_eq!(m.progress_detail.as_deref(), Some(detail.as_str()));
    let kept: Vec<String> = db
        .list_variants(&model.id)
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(kept, vec!["m.opt.cpu.t1.b1", "m.opt.cpu.t2.b1"]);
    let served: Vec<String> = db
        .serving_catalog()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.variant.name)
        .collect();
    assert_eq!(served, kept);
    let pruned = db.list_pruned_variants(&model.id).await.unwrap();
    assert_eq!(
        pruned,
        [1, 2]
            .map(|threads| PrunedVariant {
                name: format!("m.int8.cpu.t{threads}.b1"),
                file_kind: FileKind::Int8,
                hardware: HardwareKind::Cpu,
                threads,
                max_batch: 1,
                accuracy: Some(0.379),
                dominated_by: format!("m.opt.cpu.t{threads}.b1"),
                reason: reason.into(),
            })
            .to_vec()
    );
    // Deleting the model takes the pruned rows too.
    db.delete_model(&t.id, "m").await.unwrap();
    assert!(db.list_pruned_variants(&model.id).await.unwrap().is_empty());
}

/// One holder at a time; renewals keep the token, every change of holder raises it; a write
/// carrying a stale token is refused; an expired lease is taken over; replicas announce
/// themselves and leave.
async fn leases_elect_one_holder_and_fence_a_deposed_one(b: &Backends) {
    use infaas_store::db::leases::{DEPOSED, UNFENCED};
    use infaas_store::LEADER_LEASE;
    let Stores { db, .. } = open(b).await;
    let minute = 60_000;
    let a = db
        .acquire_lease(LEADER_LEASE, "a", "10.0.0.1:8080", minute)
        .await
        .unwrap();
    assert!(a.held_by("a"), "{a:?}");
    assert_eq!(a.token, 1);
    let b_try = db
        .acquire_lease(LEADER_LEASE, "b", "10.0.0.2:8080", minute)
        .await
        .unwrap();
    assert!(!b_try.held_by("b") && b_try.held_by("a"), "{b_try:?}");
    assert_eq!((b_try.token, b_try.address.as_str()), (1, "10.0.0.1:8080"));
    let renewed = db
        .acquire_lease(LEADER_LEASE, "a", "10.0.0.1:8080", minute)
        .await
        .unwrap();
    assert_eq!((renewed.token, renewed.acquired_ms), (1, a.acquired_ms));
    assert!(renewed.expires_ms >= a.expires_ms);

    // A stops: its lease lapses at once and B takes it with the next token.
    assert!(db.release_lease(LEADER_LEASE, "a").await.unwrap());
    let b_now = db
        .acquire_lease(LEADER_LEASE, "b", "10.0.0.2:8080", minute)
        .await
        .unwrap();
    assert!(b_now.held_by("b"), "{b_now:?}");
    assert_eq!(b_now.token, 2);

    // Fencing: A's late write (token 1) is refused; B's (token 2) and an unfenced one commit.
    let event = NewScalingEvent {
        tenant_id: None,
        app: None,
        variant_id: None,
        worker: Some("worker-1".into()),
        action: "add-worker".into(),
        reason: "fenced?".into(),
        cost_before_per_s: 0.0,
        cost_after_per_s: 1.0,
        created_at_ms: 1,
        fenced: true,
    };
    for (fence, allowed) in [(1, false), (DEPOSED, false), (2, true), (UNFENCED, true)] {
        db.set_fence(fence);
        let got = db.add_scaling_event(&event).await;
        match (allowed, got) {
            (true, Ok(_)) => {}
            (false, Err(StoreError::Fenced { token })) => assert_eq!(token, fence),
            (want, got) => panic!("fence {fence}: want allowed={want}, got {got:?}"),
        }
    }
    let tenantless: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM scaling_events WHERE reason = 'fenced?'")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(tenantless, 2, "exactly the two allowed writes committed");
    // A load started by a query path is not a leader's decision: never fenced.
    db.set_fence(DEPOSED);
    db.add_scaling_event(&NewScalingEvent {
        fenced: false,
        ..event.clone()
    })
    .await
    .unwrap();

    // An expired lease is taken over by the next replica that asks.
    let short = db.acquire_lease("short", "c", "c:1", 1).await.unwrap();
    assert_eq!(short.token, 1);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let taken = db.acquire_lease("short", "d", "d:1", minute).await.unwrap();
    assert!(taken.held_by("d"), "{taken:?}");
    assert_eq!(taken.token, 2);

    // A stopping replica lets all its leases lapse at once; dropping one removes it.
    db.acquire_lease("claim:1", "d", "d:1", minute)
        .await
        .unwrap();
    assert_eq!(db.release_leases_of("d").await.unwrap(), 2);
    assert!(db.lease("claim:1").await.unwrap().unwrap().expired());
    db.drop_lease("claim:1", "someone-else").await.unwrap();
    assert!(
        db.lease("claim:1").await.unwrap().is_some(),
        "only its holder drops it"
    );
    db.drop_lease("claim:1", "d").await.unwrap();
    assert!(db.lease("claim:1").await.unwrap().is_none());

    // Replicas announce themselves, renew, and withdraw.
    db.announce_replica("a", "10.0.0.1:8080").await.unwrap();
    db.announce_replica("b", "10.0.0.2:8080").await.unwrap();
    db.announce_replica("a", "10.0.0.1:8081").await.unwrap();
    let live = db.live_replicas(minute).await.unwrap();
    let ids: Vec<(&str, &str)> = live
        .iter()
        .map(|r| (r.id.as_str(), r.address.as_str()))
        .collect();
    assert_eq!(ids.len(), 2, "{live:?}");
    assert!(ids.contains(&("a", "10.0.0.1:8081")) && ids.contains(&("b", "10.0.0.2:8080")));
    // An announcement older than the window is not live, and forgetting removes it.
    assert!(db.live_replicas(-minute).await.unwrap().is_empty());
    assert_eq!(db.forget_replicas(-minute).await.unwrap(), 2);
    db.announce_replica("a", "10.0.0.1:8081").await.unwrap();
    db.announce_replica("b", "10.0.0.2:8080").await.unwrap();
    db.withdraw_replica("a").await.unwrap();
    let live = db.live_replicas(minute).await.unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].id, "b");
}

/// A replica reads the others' arrival reports, never its own, in each publisher's order; a
/// report number is taken once; the window and the pruning bound what is kept.
async fn arrival_reports_reach_the_other_replicas(b: &Backends) {
    let Stores { db, .. } = open(b).await;
    db.publish_arrivals("a", 1, "a1").await.unwrap();
    db.publish_arrivals("b", 1, "b1").await.unwrap();
    db.publish_arrivals("a", 2, "a2").await.unwrap();
    let err = db.publish_arrivals("a", 2, "again").await;
    assert!(err.is_err(), "a report number is published once: {err:?}");
    let seen_by_b: Vec<(String, i64, String)> = db
        .arrivals_since("b", 60_000)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.replica, r.seq, r.body))
        .collect();
    assert_eq!(
        seen_by_b,
        [
            ("a".to_string(), 1, "a1".to_string()),
            ("a".to_string(), 2, "a2".to_string())
        ]
    );
    let seen_by_c = db.arrivals_since("c", 60_000).await.unwrap();
    assert_eq!(seen_by_c.len(), 3);
    assert!(
        seen_by_c.iter().all(|r| r.at_ms > 1_600_000_000_000),
        "{seen_by_c:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    // Nothing within the last 5 ms; pruning what is older than 5 ms removes all three.
    assert!(db.arrivals_since("c", 5).await.unwrap().is_empty());
    assert_eq!(db.prune_arrivals(5).await.unwrap(), 3);
    assert!(db.arrivals_since("c", 60_000).await.unwrap().is_empty());
}
