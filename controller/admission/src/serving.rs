//! The webhook's TLS configuration: the serving certificate, and with
//! `--webhook-client-ca` the client certificates it requires. Admission
//! answers say what the controller's identity may see (who may read which
//! Secret, which Flows exist), so a cluster can make sure only the API
//! server asks: it then presents a client certificate from that CA (an
//! AdmissionConfiguration with a kubeconfig for the webhook), and a caller
//! without one gets no TLS session, let alone a verdict.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use super::AdmissionError;

/// The TLS configuration serving `cert` (PEM chain) with `key`, requiring a
/// client certificate signed by one of `client_ca` (PEM) when given.
pub fn server_config(
    cert: &str,
    key: &str,
    client_ca: Option<&str>,
) -> Result<Arc<ServerConfig>, AdmissionError> {
    let bad =
        |what: &str, e: &dyn std::fmt::Display| AdmissionError::Certificate(format!("{what}: {e}"));
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| bad("reading the serving certificate", &e))?;
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
        .map_err(|e| bad("reading the serving key", &e))?;
    let builder = ServerConfig::builder();
    let builder = match client_ca {
        Some(pem) => {
            let mut roots = RootCertStore::empty();
            for ca in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let ca = ca.map_err(|e| bad("reading --webhook-client-ca", &e))?;
                roots
                    .add(ca)
                    .map_err(|e| bad("a certificate of --webhook-client-ca", &e))?;
            }
            if roots.is_empty() {
                return Err(AdmissionError::Setting(
                    "--webhook-client-ca holds no PEM certificate; it names the CA whose client certificates the API server presents".into(),
                ));
            }
            let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
                .build()
                .map_err(|e| bad("the client certificate verifier", &e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| bad("the serving certificate and key", &e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate and its key, PEM.
    fn pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("certificate");
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_client_ca_file_without_a_certificate_is_refused_naming_the_flag() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (cert, key) = pair("127.0.0.1");
        let open = server_config(&cert, &key, None).expect("served");
        assert_eq!(open.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
        let (ca, _) = pair("apiserver client CA");
        let strict = server_config(&cert, &key, Some(&ca)).expect("served");
        assert_eq!(strict.alpn_protocols, open.alpn_protocols);
        // Which callers it then answers: e2e/tests/tamper_admission.rs.
        let error =
            server_config(&cert, &key, Some("not a certificate")).expect_err("no CA in the file");
        assert!(
            error
                .to_string()
                .contains("--webhook-client-ca holds no PEM certificate"),
            "{error}"
        );
    }
}
