//! The TLS trust of a client given a PEM file (`--ca-cert`, `AGENTS_CA_CERT`): the
//! certificates in it are trusted as authorities beside the system's, and a certificate in
//! it that the server presents as its own is trusted as it is (a pinned self-signed
//! certificate, which OpenSSL 3 marks `CA:TRUE` and WebPKI would refuse as an end entity).

use std::sync::Arc;

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::ApiError;

/// A TLS client configuration trusting the certificates of `pem` (see the module).
///
/// # Errors
/// [`ApiError::InvalidInput`] when `pem` holds no usable certificate or the verifier cannot
/// be built.
pub(super) fn client_config(pem: &[u8]) -> Result<rustls::ClientConfig, ApiError> {
    let invalid = |message: String| ApiError::InvalidInput { message };
    let pinned = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("the server's certificate file: {e}")))?;
    if pinned.is_empty() {
        return Err(invalid(
            "the server's certificate file holds no PEM certificate".to_string(),
        ));
    }
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let roots = rustls_platform_verifier::Verifier::new_with_extra_roots(
        pinned.clone(),
        Arc::clone(&provider),
    )
    .map_err(|e| invalid(format!("the server's certificate file: {e}")))?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS settings: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            pinned,
            roots: Arc::new(roots),
        }))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Trusts a presented certificate equal to a pinned one; anything else is verified by the
/// platform's verifier with the pinned certificates as extra authorities.
#[derive(Debug)]
struct Pinned {
    pinned: Vec<CertificateDer<'static>>,
    roots: Arc<rustls_platform_verifier::Verifier>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The very certificate the user gave: its key still proves itself in the handshake's
        // signature, which is verified below as for any other.
        if self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref())
        {
            return Ok(ServerCertVerified::assertion());
        }
        self.roots
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.roots.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.roots.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.roots.supported_verify_schemes()
    }
}
