//! The `[[tenant]]` tables: names (and pools of `count` tenants), roles, platforms, limits,
//! network and image.

use std::collections::BTreeSet;

use toml::{Spanned, Value};

use super::checker::{id_fix, span_of, valid_id, value_kind, value_text, Checker, ID_ALLOWED};
use super::{LimitEntry, PlatformChoice, RawNetwork, RawTenant, Role, TenantSpec};
use super::{MAX_TENANT_COUNT, PLANNED_PLATFORMS};
use crate::source::Span;

pub(super) fn check_tenants(c: &mut Checker<'_>, raw: &[Spanned<RawTenant>]) -> Vec<TenantSpec> {
    let platform_table = PlatformChoice::table();
    let mut out = Vec::new();
    let mut names = BTreeSet::new();
    for (i, t) in raw.iter().enumerate() {
        let span = span_of(t);
        let t = t.get_ref();
        let field = |f: &str| format!("tenant[{i}].{f}");
        let name = tenant_name(c, t, i, span, &mut names);
        let role = match &t.role {
            Some(r) => c.word(
                r,
                &field("role"),
                &[("victim", Role::Victim), ("aggressor", Role::Aggressor)],
                &[],
            ),
            None => {
                c.err(
                    span,
                    &field("role"),
                    format!("tenant `{name}` has no role"),
                    "victim, aggressor",
                    "add role = \"victim\" (runs probes) or role = \"aggressor\" (runs stressors)"
                        .into(),
                );
                None
            }
        }
        .unwrap_or(Role::Victim);
        let platform = t
            .platform
            .as_ref()
            .and_then(|p| c.word(p, &field("platform"), &platform_table, PLANNED_PLATFORMS));
        let mut limits = tenant_limits(c, t, i);
        let netns = tenant_network(c, &t.network, i, &mut limits);
        let count = tenant_count(c, &t.count, &field("count"));
        if let Some(img) = &t.image {
            if let Err(why) = isobench_platform::userimage::check_reference(img.get_ref()) {
                c.err(
                    span_of(img),
                    &field("image"),
                    why,
                    "an image reference: name, name:tag, registry/name:tag or name@sha256:...",
                    "write image = \"name:tag\", e.g. image = \"redis:7\"".into(),
                );
            }
        }
        let spec = TenantSpec {
            name,
            role,
            platform,
            limits,
            netns,
            span,
            table: i,
            group: None,
            image: t.image.as_ref().map(|i| i.get_ref().clone()),
            image_span: t.image.as_ref().map(span_of),
        };
        match count {
            None => out.push(spec),
            Some(n) => {
                let at = t.name.as_ref().map_or(span, span_of);
                pool(c, spec, n, at, &mut names, &mut out);
            }
        }
    }
    roles_present(c, raw.is_empty(), &out);
    out
}

/// The tenant's `name`, which no other tenant may use.
fn tenant_name(
    c: &mut Checker<'_>,
    t: &RawTenant,
    i: usize,
    span: Span,
    names: &mut BTreeSet<String>,
) -> String {
    let field = format!("tenant[{i}].name");
    match &t.name {
        Some(n) if valid_id(n.get_ref()) => {
            if !names.insert(n.get_ref().clone()) {
                c.err(
                    span_of(n),
                    &field,
                    format!("tenant `{}` is declared twice", n.get_ref()),
                    "a name no other tenant uses",
                    format!("rename it, e.g. name = \"{}-2\"", n.get_ref()),
                );
            }
            n.get_ref().clone()
        }
        Some(n) => {
            c.err(
                span_of(n),
                &field,
                format!("`{}` is not a valid tenant name", n.get_ref()),
                ID_ALLOWED,
                id_fix(n.get_ref()),
            );
            format!("tenant{i}")
        }
        None => {
            c.err(
                span,
                &field,
                "the tenant has no name".into(),
                ID_ALLOWED,
                format!("add name = \"tenant{i}\""),
            );
            format!("tenant{i}")
        }
    }
}

/// The `[tenant.limits]` table, as written.
fn tenant_limits(c: &mut Checker<'_>, t: &RawTenant, i: usize) -> Vec<LimitEntry> {
    let mut limits = Vec::new();
    let Some(table) = &t.limits else {
        return limits;
    };
    for (k, v) in table {
        match value_text(v.get_ref()) {
            Some(text) => limits.push(LimitEntry {
                key: k.get_ref().clone(),
                value: text,
                key_span: span_of(k),
                value_span: span_of(v),
            }),
            None => c.err(
                span_of(v),
                &format!("tenant[{i}].limits.{}", k.get_ref()),
                "a table is not a limit value".into(),
                "a number or a string such as \"1G\"",
                format!("write {} = \"...\"", k.get_ref()),
            ),
        }
    }
    limits
}

/// The `[tenant.network]` table: whether the tenant has its own network namespace; its rates
/// join `limits` as `net_*` keys.
fn tenant_network(
    c: &mut Checker<'_>,
    network: &Option<Spanned<RawNetwork>>,
    i: usize,
    limits: &mut Vec<LimitEntry>,
) -> bool {
    let Some(n) = network else { return false };
    let n = n.get_ref();
    let netns = n.namespace.as_ref().is_some_and(|b| *b.get_ref());
    for (key, v) in [
        ("net_rate", &n.rate),
        ("net_egress", &n.egress),
        ("net_ingress", &n.ingress),
    ] {
        let Some(v) = v else { continue };
        let short = key.trim_start_matches("net_");
        let field = format!("tenant[{i}].network.{short}");
        match value_text(v.get_ref()) {
            Some(text) => {
                if !netns {
                    c.err(
                        span_of(v),
                        &field,
                        "a network rate needs the tenant's own network namespace".into(),
                        "namespace = true together with rate, egress or ingress",
                        "add namespace = true to this [tenant.network] table".into(),
                    );
                }
                limits.push(LimitEntry {
                    key: key.into(),
                    value: text,
                    key_span: span_of(v),
                    value_span: span_of(v),
                })
            }
            None => c.err(
                span_of(v),
                &field,
                "a table is not a rate".into(),
                "a rate in bits/s such as \"100mbit\"",
                format!("write {short} = \"100mbit\""),
            ),
        }
    }
    netns
}

/// The `count` of a `[[tenant]]` table: `None` when absent (one tenant named as written),
/// else how many tenants the table declares.
fn tenant_count(c: &mut Checker<'_>, v: &Option<Spanned<Value>>, field: &str) -> Option<i64> {
    let v = v.as_ref()?;
    match v.get_ref() {
        Value::Integer(n) if (1..=MAX_TENANT_COUNT).contains(n) => Some(*n),
        other => {
            let problem = match other {
                Value::Integer(n) => format!("count = {n} is out of range"),
                o => format!("{} is not a tenant count", value_kind(o)),
            };
            c.err(
                span_of(v),
                field,
                problem,
                &format!(
                    "an integer in 1..={MAX_TENANT_COUNT}: the table then declares that many \
                     tenants, NAME-1..NAME-N, with the same role, limits and network"
                ),
                "write count = 8, or remove count for a single tenant".into(),
            );
            None
        }
    }
}

/// The `n` tenants `NAME-1..NAME-n` of a table with `count = n`, into `out`.
fn pool(
    c: &mut Checker<'_>,
    spec: TenantSpec,
    n: i64,
    at: Span,
    names: &mut BTreeSet<String>,
    out: &mut Vec<TenantSpec>,
) {
    let field = format!("tenant[{}].name", spec.table);
    for k in 1..=n {
        let member = format!("{}-{k}", spec.name);
        if valid_id(&member) && !names.insert(member.clone()) {
            c.err(
                at,
                &field,
                format!("tenant `{member}` of this pool of {n} is also declared elsewhere"),
                "names no other tenant uses (a pool NAME with count = N is \
                 NAME-1..NAME-N)",
                format!(
                    "rename the pool or the other tenant, e.g. name = \"{}-pool\"",
                    spec.name
                ),
            );
        }
        out.push(TenantSpec {
            name: member,
            group: Some(spec.name.clone()),
            ..spec.clone()
        });
    }
    let longest = format!("{}-{n}", spec.name);
    if valid_id(&spec.name) && !valid_id(&longest) {
        c.err(
            at,
            &field,
            format!(
                "with count = {n} the last tenant would be called `{longest}`, \
                 longer than 32 characters"
            ),
            ID_ALLOWED,
            format!(
                "shorten the name to at most {} characters",
                32 - (longest.len() - spec.name.len())
            ),
        );
    }
}

/// Every scenario needs tenants, at least one victim and one aggressor.
fn roles_present(c: &mut Checker<'_>, none_declared: bool, out: &[TenantSpec]) {
    let whole = Span { start: 0, end: 0 };
    if none_declared {
        c.err(
            whole,
            "tenant",
            "the scenario declares no tenants".into(),
            "one or more [[tenant]] tables with role = \"victim\" and one or more with role = \"aggressor\"",
            "add [[tenant]] name = \"victim\" role = \"victim\" and [[tenant]] name = \"aggressor\" role = \"aggressor\" (see examples/quick.toml)".into(),
        );
        return;
    }
    for (role, other) in [(Role::Victim, "probes"), (Role::Aggressor, "stressors")] {
        if !out.iter().any(|t| t.role == role) {
            let last = out.last().map(|t| t.span).unwrap_or(whole);
            c.err(
                last,
                "tenant",
                format!("no tenant has role = \"{role}\"; a matrix needs one to run the {other}"),
                "at least one victim and one aggressor",
                format!("add a [[tenant]] with role = \"{role}\""),
            );
        }
    }
}
