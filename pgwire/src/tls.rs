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
