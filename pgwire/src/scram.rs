//! SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it, without channel binding: the
//! client sends `n,,` as its GS2 header and an empty user name (the server takes the user from
//! the startup message). The password is used as its UTF-8 bytes; SASLprep is not applied, which
//! matches the server for every password that is already in normalized form (all ASCII ones).

use crate::crypto::{base64_decode, base64_encode, hi, hmac_sha256, sha256};

/// Why the exchange cannot go on (the message never contains the password).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ScramError(pub(crate) String);

/// The client side of one SCRAM-SHA-256 exchange.
pub(crate) struct Scram {
    client_nonce: String,
    client_first_bare: String,
    /// The expected `ServerSignature`, known once the final message is built.
    server_signature: Option<[u8; 32]>,
}

impl Scram {
    /// Starts an exchange with `client_nonce` (printable ASCII without `,`).
    pub(crate) fn new(client_nonce: String) -> Self {
        let client_first_bare = format!("n=,r={client_nonce}");
        Scram {
            client_nonce,
            client_first_bare,
            server_signature: None,
        }
    }

    /// The client-first-message.
    pub(crate) fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// Answers the server-first-message with the client-final-message.
    pub(crate) fn client_final(
        &mut self,
        password: &[u8],
        server_first: &str,
    ) -> Result<String, ScramError> {
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attr in server_first.split(',') {
            if let Some(v) = attr.strip_prefix("r=") {
                nonce = Some(v);
            } else if let Some(v) = attr.strip_prefix("s=") {
                salt = Some(v);
            } else if let Some(v) = attr.strip_prefix("i=") {
                iterations = Some(v);
            } else if attr.starts_with("m=") {
                return Err(ScramError(
                    "the server demands a SCRAM extension this client does not know".into(),
                ));
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(ScramError(
                "the server-first-message lacks its nonce, salt or iteration count".into(),
            ));
        };
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(ScramError(
                "the server's nonce does not extend the client's".into(),
            ));
        }
        let salt = base64_decode(salt)
            .ok_or_else(|| ScramError("the server's salt is not base64".into()))?;
        let iterations: u32 = iterations.parse().ok().filter(|&i| i > 0).ok_or_else(|| {
            ScramError("the server's iteration count is not a positive integer".into())
        })?;

        let salted = hi(password, &salt, iterations);
        let client_key = hmac_sha256(&salted, b"Client Key");
        let stored_key = sha256(&client_key);
        // "biws" is base64("n,,"): no channel binding.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = hmac_sha256(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(client_signature.iter())
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac_sha256(&salted, b"Server Key");
        self.server_signature = Some(hmac_sha256(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", base64_encode(&proof)))
    }

    /// Checks the server-final-message: the server proves it knows the password too.
    pub(crate) fn verify_server_final(&self, server_final: &str) -> Result<(), ScramError> {
        if let Some(e) = server_final.strip_prefix("e=") {
            return Err(ScramError(format!("the server refused the exchange: {e}")));
        }
        let Some(v) = server_final.split(',').find_map(|a| a.strip_prefix("v=")) else {
            return Err(ScramError(
                "the server-final-message has no verifier".into(),
            ));
        };
        let Some(expected) = self.server_signature else {
            return Err(ScramError(
                "the server-final-message came before the client-final-message".into(),
            ));
        };
        match base64_decode(v) {
            Some(got) if got == expected => Ok(()),
            _ => Err(ScramError(
                "the server's signature is wrong: it does not know the password".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 §3 (user "user", password "pencil"). PostgreSQL leaves the user name empty in
    /// the client-first-message, so the RFC's messages are rebuilt with `n=user` here.
    #[test]
    fn scram_sha256_matches_rfc_7677_example() {
        let mut scram = Scram::new("rOprNGfwEbeRWgbNEkqO".into());
        scram.client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO".into();
        assert_eq!(scram.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = scram.client_final(b"pencil", server_first).unwrap();
        assert_eq!(
            client_final,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(
            scram
                .verify_server_final("v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
                .is_err()
        );
        assert!(scram.verify_server_final("e=invalid-proof").is_err());
    }

    #[test]
    fn scram_refuses_a_nonce_that_does_not_extend_the_clients() {
        let mut scram = Scram::new("abc".into());
        for bad in [
            "r=xyz123,s=AAAA,i=4096",
            "r=abc,s=AAAA,i=4096",
            "r=abcd,s=!!,i=4096",
            "r=abcd,s=AAAA,i=0",
            "r=abcd,s=AAAA",
            "m=ext,r=abcd,s=AAAA,i=1",
        ] {
            assert!(scram.client_final(b"pw", bad).is_err(), "{bad}");
        }
        assert!(
            scram.verify_server_final("v=AAAA").is_err(),
            "a verifier before the final message"
        );
    }
}
