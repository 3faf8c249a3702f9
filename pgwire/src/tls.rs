//! TLS for TCP connections, on rustls with the ring provider: the client configuration for an
//! `sslmode`, and the handshake after PostgreSQL's `SSLRequest`.

use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore,
    SignatureScheme, StreamOwned,
};

use crate::config::{Config, SslMode};
use crate::error::{Error, Result};

/// A TLS connection to the server.
pub(crate) type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// How the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Not at all (`prefer`, `require` without `sslrootcert`): the connection is encrypted
    /// against an eavesdropper, not against an impostor.
    None,
    /// Signed by a trusted authority, any host name (`verify-ca`, `require` with `sslrootcert`).
    Authority,
    /// Signed by a trusted authority and naming the host (`verify-full`).
    Full,
}

fn check(config: &Config) -> Check {
    match config.ssl_mode() {
        SslMode::VerifyFull => Check::Full,
        SslMode::VerifyCa => Check::Authority,
        // libpq: with a root certificate file, `require` (and the modes below it) verify it.
        _ if config.ssl_root_cert().is_some() => Check::Authority,
        _ => Check::None,
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(what: String) -> Error {
    Error::Config(what)
}

/// The trusted authorities: the `sslrootcert` file, else (or for `sslrootcert=system`) the
/// Mozilla roots built into the program (`webpki-roots`).
fn roots(config: &Config) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match config.ssl_root_cert() {
        Some(path) if path != Path::new("system") => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| {
                    tls_error(format!(
                        "cannot read the sslrootcert file {}: {e}",
                        path.display()
                    ))
                })?;
            if certs.is_empty() {
                return Err(tls_error(format!(
                    "the sslrootcert file {} holds no PEM certificate",
                    path.display()
                )));
            }
            for cert in certs {
                store.add(cert).map_err(|e| {
                    tls_error(format!(
                        "the sslrootcert file {} holds a certificate that cannot be a root: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        _ => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    Ok(store)
}

/// The client configuration for `config`'s `sslmode`, roots and client certificate.
pub(crate) fn client_config(config: &Config) -> Result<Arc<ClientConfig>> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(format!("cannot set up TLS: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match check(config) {
        Check::None => Arc::new(Unchecked {
            algorithms: provider.signature_verification_algorithms,
        }),
        mode => {
            let webpki = WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(config)?),
                provider.clone(),
            )
            .build()
            .map_err(|e| tls_error(format!("cannot set up TLS verification: {e}")))?;
            Arc::new(Verified {
                webpki,
                host_name: mode == Check::Full,
            })
        }
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let tls = match config.ssl_client_cert() {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| {
                    tls_error(format!(
                        "cannot read the sslcert file {}: {e}",
                        cert.display()
                    ))
                })?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                tls_error(format!(
                    "cannot read the sslkey file {}: {e}",
                    key.display()
                ))
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| tls_error(format!("the sslcert and sslkey do not fit: {e}")))?
        }
    };
    Ok(Arc::new(tls))
}

/// Runs the TLS handshake on `sock` (the server has answered `S` to the `SSLRequest`).
pub(crate) fn handshake(
    config: &Config,
    host: &str,
    mut sock: TcpStream,
    target: &str,
) -> Result<TlsStream> {
    let tls = client_config(config)?;
    // Under the modes that do not check the name any valid name will do for SNI.
    let name = ServerName::try_from(host.to_string())
        .or_else(|_| ServerName::try_from("localhost".to_string()))
        .map_err(|e| tls_error(format!("`{host}` is not a host name TLS accepts: {e}")))?;
    let mut conn = ClientConnection::new(tls, name)
        .map_err(|e| tls_error(format!("cannot start TLS to {target}: {e}")))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(|e| {
            Error::io(
                format!(
                    "the TLS handshake with PostgreSQL at {target} failed (sslmode={})",
                    config.ssl_mode()
                ),
                e,
            )
        })?;
    }
    Ok(StreamOwned::new(conn, sock))
}

/// The `tls-server-end-point` channel binding (RFC 5929) of the connection: the hash of the
/// server's certificate, with the hash of its signature algorithm (SHA-256 for MD5 and SHA-1).
/// `None` when the algorithm has no such hash (Ed25519, RSA-PSS): SCRAM then runs unbound.
pub(crate) fn server_end_point(stream: &TlsStream) -> Option<Vec<u8>> {
    use sha2::Digest as _;
    let cert = stream.conn.peer_certificates()?.first()?;
    Some(match signature_hash(cert)? {
        Hash::Sha256 => sha2::Sha256::digest(cert.as_ref()).to_vec(),
        Hash::Sha384 => sha2::Sha384::digest(cert.as_ref()).to_vec(),
        Hash::Sha512 => sha2::Sha512::digest(cert.as_ref()).to_vec(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

/// The hash for the channel binding of a certificate signed with its `signatureAlgorithm`
/// (`Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }`).
fn signature_hash(cert: &[u8]) -> Option<Hash> {
    let (tag, body, _) = der(cert)?;
    if tag != 0x30 {
        return None;
    }
    let (_, _, rest) = der(body)?; // tbsCertificate
    let (tag, algorithm, _) = der(rest)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, oid, _) = der(algorithm)?;
    if tag != 0x06 {
        return None;
    }
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01]; // 1.2.840.113549.1.1
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04]; // 1.2.840.10045.4
    match oid {
        [rsa @ .., last] if rsa == RSA => match last {
            4 | 5 | 11 | 14 => Some(Hash::Sha256), // md5, sha1, sha256, sha224 with RSA
            12 => Some(Hash::Sha384),
            13 => Some(Hash::Sha512),
            _ => None,
        },
        [ecdsa @ .., 1] if ecdsa == ECDSA => Some(Hash::Sha256), // ecdsa-with-SHA1
        [ecdsa @ .., 3, last] if ecdsa == ECDSA => match last {
            1 | 2 => Some(Hash::Sha256),
            3 => Some(Hash::Sha384),
            4 => Some(Hash::Sha512),
            _ => None,
        },
        _ => None,
    }
}

/// One DER element of `data`: its tag, its contents and what follows it.
fn der(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = data.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// Checks the handshake's signatures but not the certificate.
#[derive(Debug)]
struct Unchecked {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// webpki's verification, with the host-name check dropped for `verify-ca` (webpki checks the
/// chain first, so a name mismatch means the chain was good).
#[derive(Debug)]
struct Verified {
    webpki: Arc<WebPkiServerVerifier>,
    host_name: bool,
}

impl ServerCertVerifier for Verified {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.host_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate's outer layers with only the signature algorithm filled in.
    fn cert_with_algorithm(oid: &[u8]) -> Vec<u8> {
        let mut algorithm = vec![0x06, u8::try_from(oid.len()).unwrap()];
        algorithm.extend_from_slice(oid);
        let mut body = vec![0x30, 0x00]; // an empty tbsCertificate
        body.push(0x30);
        body.push(u8::try_from(algorithm.len()).unwrap());
        body.extend_from_slice(&algorithm);
        body.extend_from_slice(&[0x03, 0x01, 0x00]); // the signature
        let mut cert = vec![0x30, u8::try_from(body.len()).unwrap()];
        cert.extend_from_slice(&body);
        cert
    }

    #[test]
    fn the_channel_binding_hash_follows_the_signature_algorithm() {
        let rsa = |n: u8| [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, n];
        let ecdsa = |n: u8| [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, n];
        for (oid, want) in [
            (rsa(5).to_vec(), Some(Hash::Sha256)),
            (rsa(11).to_vec(), Some(Hash::Sha256)),
            (rsa(12).to_vec(), Some(Hash::Sha384)),
            (rsa(13).to_vec(), Some(Hash::Sha512)),
            (rsa(10).to_vec(), None), // RSA-PSS: the hash is in the parameters
            (ecdsa(2).to_vec(), Some(Hash::Sha256)),
            (ecdsa(3).to_vec(), Some(Hash::Sha384)),
            (ecdsa(4).to_vec(), Some(Hash::Sha512)),
            (vec![0x2b, 0x65, 0x70], None), // Ed25519
        ] {
            assert_eq!(signature_hash(&cert_with_algorithm(&oid)), want, "{oid:x?}");
        }
        assert_eq!(signature_hash(&[0x30, 0x05, 0x30]), None, "truncated");
        assert_eq!(signature_hash(&[]), None);
    }
}
