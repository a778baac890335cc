//! The webhook's self-managed TLS: a CA and a serving certificate made at
//! start and kept in one Secret, so every replica serves the same
//! certificate and the API server trusts one caBundle. A replica that finds
//! the certificate near its end (or naming other hosts) issues a new one
//! from the same CA; the CA itself is replaced a year before it ends, and
//! the old one stays in the bundle while certificates it signed may still
//! be served.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use super::AdmissionError;
use coxswain_kube::names::{
    CA_NOT_AFTER_ANNOTATION as CA_NOT_AFTER, CERT_NAMES_ANNOTATION as NAMES,
    CERT_NOT_AFTER_ANNOTATION as CERT_NOT_AFTER,
};

/// How long a serving certificate lasts.
pub const LEAF_VALIDITY: SignedDuration = SignedDuration::from_hours(90 * 24);
/// A serving certificate is replaced when it has less than this left.
pub const LEAF_RENEW_BEFORE: SignedDuration = SignedDuration::from_hours(30 * 24);
/// How long the CA lasts.
pub const CA_VALIDITY: SignedDuration = SignedDuration::from_hours(10 * 365 * 24);
/// The CA is replaced when it has less than this left.
pub const CA_RENEW_BEFORE: SignedDuration = SignedDuration::from_hours(365 * 24);

const CA_NAME: &str = "coxswain admission CA";
const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";

/// What the Secret holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The CA certificates the API server trusts (PEM): the current CA
    /// first, then the one it replaced, if any.
    pub ca_bundle: String,
    /// The current CA's key (PEM).
    pub ca_key: String,
    /// The serving certificate (PEM).
    pub cert: String,
    /// Its key (PEM).
    pub key: String,
    /// When the current CA ends.
    pub ca_not_after: Timestamp,
    /// When the serving certificate ends.
    pub cert_not_after: Timestamp,
    /// The host names and addresses it is for.
    pub names: Vec<String>,
}

/// What a replica does with what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Serve it.
    Keep,
    /// Issue a new serving certificate from the same CA.
    NewCertificate,
    /// Make a new CA (and a certificate from it).
    NewCa,
}

/// Whether what is stored can be served at `now` for `names`.
pub fn plan(stored: Option<&Stored>, names: &[String], now: Timestamp) -> Plan {
    let Some(stored) = stored else {
        return Plan::NewCa;
    };
    if stored.ca_not_after.duration_since(now) < CA_RENEW_BEFORE {
        return Plan::NewCa;
    }
    if stored.cert_not_after.duration_since(now) < LEAF_RENEW_BEFORE || stored.names != names {
        return Plan::NewCertificate;
    }
    Plan::Keep
}

/// Carries out `plan`, keeping what it does not replace.
pub fn renew(
    stored: Option<&Stored>,
    plan: Plan,
    names: &[String],
    now: Timestamp,
) -> Result<Stored, AdmissionError> {
    let (ca_bundle, ca_key, ca_not_after) = match (plan, stored) {
        (Plan::NewCertificate | Plan::Keep, Some(s)) => {
            (s.ca_bundle.clone(), s.ca_key.clone(), s.ca_not_after)
        }
        _ => {
            let not_after = day_after(now, CA_VALIDITY);
            let key = KeyPair::generate()?;
            let cert = ca_params(now, not_after)?.self_signed(&key)?;
            let mut bundle = cert.pem();
            // Certificates the old CA signed are still served until every
            // replica has loaded the new one.
            if let Some(old) = stored.and_then(|s| first_pem(&s.ca_bundle))
                && stored.is_some_and(|s| s.ca_not_after > now)
            {
                bundle.push_str(&old);
            }
            (bundle, key.serialize_pem(), not_after)
        }
    };
    let issuer = Issuer::new(ca_params(now, ca_not_after)?, KeyPair::from_pem(&ca_key)?);
    let cert_not_after = day_after(now, LEAF_VALIDITY).min(ca_not_after);
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.subject_alt_names = names
        .iter()
        .map(|n| match n.parse() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => n.clone().try_into().map(SanType::DnsName),
        })
        .collect::<Result<_, _>>()?;
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().cloned().unwrap_or_default(),
    );
    set_validity(&mut params, now, cert_not_after);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Stored {
        ca_bundle,
        ca_key,
        cert: cert.pem(),
        key: key.serialize_pem(),
        ca_not_after,
        cert_not_after,
        names: names.to_vec(),
    })
}

/// The CA's parameters; the same DN and key usages each time, so a
/// certificate issued later names the CA that is stored.
fn ca_params(now: Timestamp, not_after: Timestamp) -> Result<CertificateParams, AdmissionError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, now, not_after);
    Ok(params)
}

/// `now + validity`, at the start of that day (UTC): certificates count days.
fn day_after(now: Timestamp, validity: SignedDuration) -> Timestamp {
    let then = now.saturating_add(validity).unwrap_or(now);
    let date = then.to_zoned(jiff::tz::TimeZone::UTC).date();
    date.to_zoned(jiff::tz::TimeZone::UTC)
        .map(|z| z.timestamp())
        .unwrap_or(then)
}

/// Sets a certificate's validity: from the day before `now` (clocks
/// differ) to `not_after`, in whole days.
fn set_validity(params: &mut CertificateParams, now: Timestamp, not_after: Timestamp) {
    let ymd = |t: Timestamp| {
        let d = t.to_zoned(jiff::tz::TimeZone::UTC).date();
        rcgen::date_time_ymd(i32::from(d.year()), d.month() as u8, d.day() as u8)
    };
    params.not_before = ymd(now - SignedDuration::from_hours(24));
    params.not_after = ymd(not_after);
}

/// The first PEM block of a bundle.
fn first_pem(bundle: &str) -> Option<String> {
    const END: &str = "-----END CERTIFICATE-----";
    let end = bundle.find(END)? + END.len();
    Some(format!("{}\n", bundle[..end].trim_start()))
}

impl Stored {
    /// Reads the Secret; `None` when it lacks a part (then it is made anew).
    pub fn from_secret(secret: &Secret) -> Option<Stored> {
        let data = secret.data.as_ref()?;
        let text = |k: &str| {
            data.get(k)
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
        };
        let annotations = secret.annotations();
        let time = |k: &str| annotations.get(k)?.parse::<Timestamp>().ok();
        Some(Stored {
            ca_bundle: text(CA_CERT)?,
            ca_key: text(CA_KEY)?,
            cert: text(CERT)?,
            key: text(KEY)?,
            ca_not_after: time(CA_NOT_AFTER)?,
            cert_not_after: time(CERT_NOT_AFTER)?,
            names: annotations
                .get(NAMES)?
                .split(',')
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect(),
        })
    }

    /// The Secret holding it (type `kubernetes.io/tls`).
    pub fn to_secret(&self, name: &str, namespace: &str) -> Secret {
        let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
        Secret {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                annotations: Some(BTreeMap::from([
                    (CA_NOT_AFTER.to_string(), self.ca_not_after.to_string()),
                    (CERT_NOT_AFTER.to_string(), self.cert_not_after.to_string()),
                    (NAMES.to_string(), self.names.join(",")),
                ])),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "coxswain".to_string(),
                )])),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from([
                (CA_CERT.to_string(), bytes(&self.ca_bundle)),
                (CA_KEY.to_string(), bytes(&self.ca_key)),
                (CERT.to_string(), bytes(&self.cert)),
                (KEY.to_string(), bytes(&self.key)),
            ])),
            ..Default::default()
        }
    }
}

impl Stored {
    /// `existing` holding it: its type, labels, annotations and owners are
    /// kept (a Secret a Helm chart made stays the chart's, `Opaque` stays
    /// `Opaque` as the type never changes), its data replaced, and the
    /// resourceVersion it was read at guards the write.
    pub fn into_existing(&self, existing: Secret) -> Secret {
        let fresh = self.to_secret(
            &existing.name_any(),
            existing.namespace().as_deref().unwrap_or_default(),
        );
        let mut metadata = existing.metadata;
        let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
        for (key, value) in fresh.metadata.labels.unwrap_or_default() {
            labels.entry(key).or_insert(value);
        }
        metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .extend(fresh.metadata.annotations.unwrap_or_default());
        metadata.managed_fields = None;
        Secret {
            metadata,
            type_: existing.type_.or(fresh.type_),
            data: fresh.data,
            ..Default::default()
        }
    }
}

/// The certificate to serve for `names`, from the Secret `name`; made or
/// renewed there when needed. Replicas racing to write it settle on
/// whichever write the API server took first.
pub async fn ensure(
    api: &Api<Secret>,
    name: &str,
    namespace: &str,
    names: &[String],
) -> Result<Stored, AdmissionError> {
    for _ in 0..5 {
        let found = api.get_opt(name).await.map_err(|e| {
            AdmissionError::kube(format!("reading the Secret {namespace}/{name}"), e)
        })?;
        let stored = found.as_ref().and_then(Stored::from_secret);
        let now = Timestamp::now();
        let plan = plan(stored.as_ref(), names, now);
        if plan == Plan::Keep
            && let Some(stored) = stored
        {
            return Ok(stored);
        }
        let renewed = renew(stored.as_ref(), plan, names, now)?;
        let written = match found {
            None => {
                let secret = renewed.to_secret(name, namespace);
                api.create(&PostParams::default(), &secret).await
            }
            Some(old) => {
                let secret = renewed.into_existing(old);
                api.replace(name, &PostParams::default(), &secret).await
            }
        };
        match written {
            Ok(_) => {
                tracing::info!(secret = %format!("{namespace}/{name}"), ?plan, "webhook certificate written");
                return Ok(renewed);
            }
            // Another replica wrote it first: read theirs.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => {
                return Err(AdmissionError::kube(
                    format!("writing the Secret {namespace}/{name}"),
                    e,
                ));
            }
        }
    }
    Err(AdmissionError::Certificate(format!(
        "the Secret {namespace}/{name} kept changing while it was being renewed"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["127.0.0.1".to_string()]
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("timestamp")
    }

    #[test]
    fn nothing_stored_makes_a_ca_and_a_certificate() {
        let now = at("2030-01-10T12:00:00Z");
        assert_eq!(plan(None, &names(), now), Plan::NewCa);
        let made = renew(None, Plan::NewCa, &names(), now).expect("made");
        assert_eq!(made.cert_not_after, at("2030-04-10T00:00:00Z"));
        assert!(made.ca_not_after > at("2039-12-01T00:00:00Z"));
        assert_eq!(plan(Some(&made), &names(), now), Plan::Keep);
        let read = Stored::from_secret(&made.to_secret("s", "ns")).expect("read back");
        assert_eq!(read, made);
    }

    #[test]
    fn a_secret_made_by_a_chart_keeps_its_type_and_owner_labels() {
        let made = renew(None, Plan::NewCa, &names(), at("2030-01-10T12:00:00Z")).expect("made");
        let chart = Secret {
            metadata: ObjectMeta {
                name: Some("tls".into()),
                namespace: Some("ops".into()),
                resource_version: Some("42".into()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "Helm".to_string(),
                )])),
                annotations: Some(BTreeMap::from([(
                    "meta.helm.sh/release-name".to_string(),
                    "coxswain".to_string(),
                )])),
                ..Default::default()
            },
            type_: Some("Opaque".into()),
            ..Default::default()
        };
        let written = made.into_existing(chart);
        assert_eq!(written.type_.as_deref(), Some("Opaque"));
        assert_eq!(written.metadata.resource_version.as_deref(), Some("42"));
        let labels = written.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm");
        let annotations = written.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations["meta.helm.sh/release-name"], "coxswain");
        assert_eq!(Stored::from_secret(&written), Some(made));
    }

    #[test]
    fn a_certificate_near_its_end_is_renewed_from_the_same_ca() {
        let now = at("2030-01-10T12:00:00Z");
        let made = renew(None, Plan::NewCa, &names(), now).expect("made");
        let later = at("2030-03-15T00:00:00Z"); // 26 days left
        assert_eq!(plan(Some(&made), &names(), later), Plan::NewCertificate);
        let renewed = renew(Some(&made), Plan::NewCertificate, &names(), later).expect("renewed");
        assert_eq!(renewed.ca_bundle, made.ca_bundle);
        assert_ne!(renewed.cert, made.cert);
        assert_eq!(renewed.cert_not_after, at("2030-06-13T00:00:00Z"));
        assert_eq!(plan(Some(&renewed), &names(), later), Plan::Keep);
    }

    #[test]
    fn other_names_or_an_ageing_ca_are_replaced() {
        let now = at("2030-01-10T12:00:00Z");
        let made = renew(None, Plan::NewCa, &names(), now).expect("made");
        let other = vec!["coxswain.ns.svc".to_string()];
        assert_eq!(plan(Some(&made), &other, now), Plan::NewCertificate);
        let near_end = made.ca_not_after - SignedDuration::from_hours(100 * 24);
        assert_eq!(plan(Some(&made), &names(), near_end), Plan::NewCa);
        let rotated = renew(Some(&made), Plan::NewCa, &names(), near_end).expect("rotated");
        assert_ne!(rotated.ca_key, made.ca_key);
        // The old CA stays trusted next to the new one.
        assert_eq!(rotated.ca_bundle.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(rotated.ca_bundle.ends_with(&made.ca_bundle));
    }
}
