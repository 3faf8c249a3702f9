//! A throwaway certificate authority for TLS tests (feature `cluster`): its certificate and the
//! server certificates it signs, PEM, for [`TestClusterBuilder::tls`] and a client's
//! `sslrootcert`.
//!
//! [`TestClusterBuilder::tls`]: crate::cluster::TestClusterBuilder::tls

use base64::Engine as _;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

use crate::cluster::ClusterError;

/// A certificate authority made in the test: nothing outside the test trusts it.
pub struct TestCa {
    pem: String,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

fn failed(what: &str) -> impl FnOnce(rcgen::Error) -> ClusterError + '_ {
    move |e| ClusterError::Setup(format!("cannot make {what}: {e}"))
}

/// `der` as a PEM block labelled `label`.
pub fn pem(label: &str, der: &[u8]) -> String {
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    // Base64 is ASCII, so every 64-character chunk is a whole line of it.
    for line in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

impl TestCa {
    /// A self-signed authority with common name `name`.
    pub fn new(name: &str) -> Result<TestCa, ClusterError> {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(failed("the CA's parameters"))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().map_err(failed("the CA's key"))?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(failed("the CA"))?;
        Ok(TestCa {
            pem: pem("CERTIFICATE", issuer.der()),
            issuer,
        })
    }

    /// The authority's certificate, PEM (what `sslrootcert` names).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A server certificate for the host `names` signed by this authority, and its private
    /// key: `(certificate PEM, key PEM)`.
    pub fn server_cert(&self, names: &[&str]) -> Result<(String, String), ClusterError> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let key = KeyPair::generate().map_err(failed("a server key"))?;
        let cert = CertificateParams::new(names)
            .map_err(failed("the server certificate's parameters"))?
            .signed_by(&key, &self.issuer)
            .map_err(failed("a server certificate"))?;
        Ok((
            pem("CERTIFICATE", cert.der()),
            pem("PRIVATE KEY", &key.serialize_der()),
        ))
    }
}
