//! Certificates for servers the tests start on the loopback address: a CA
//! of their own and a certificate it signed for 127.0.0.1, as cert-manager
//! or a proxy's operator would provide.

/// A CA and a serving certificate for 127.0.0.1 signed by it.
pub struct LoopbackCert {
    /// The CA's certificate, PEM (a caBundle, a kubeconfig's authority).
    pub ca_pem: String,
    /// The serving certificate, PEM.
    pub cert_pem: String,
    /// The serving certificate, DER.
    pub cert_der: Vec<u8>,
    /// Its private key, PKCS#8 PEM.
    pub key_pem: String,
    /// Its private key, PKCS#8 DER.
    pub key_der: Vec<u8>,
}

/// A new CA named `ca_name` and a certificate it signed for 127.0.0.1.
pub fn loopback_cert(ca_name: &str) -> Result<LoopbackCert, rcgen::Error> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ca_name);
    let ca_key = rcgen::KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let mut leaf_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    leaf_params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress([127, 0, 0, 1].into()));
    let leaf_key = rcgen::KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &rcgen::Issuer::new(ca_params, ca_key))?;
    Ok(LoopbackCert {
        ca_pem: ca.pem(),
        cert_pem: leaf.pem(),
        cert_der: leaf.der().to_vec(),
        key_pem: leaf_key.serialize_pem(),
        key_der: leaf_key.serialize_der(),
    })
}
