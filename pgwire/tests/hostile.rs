//! A scripted server on loopback that misbehaves during authentication: the client must refuse
//! it before trusting the connection (or spending an hour of CPU on it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;

use kanban_pgwire::{Client, Config, Error};

/// What the scripted server does after the client's startup message.
#[derive(Clone, Copy)]
enum Script {
    /// SCRAM with `i=` this count, then `AuthenticationOk` if the client goes on.
    ScramIterations(&'static str),
    /// A valid SCRAM challenge, then `AuthenticationOk` with no SASLFinal.
    OkWithoutFinal,
    /// A valid SCRAM challenge, then a SASLFinal whose signature is wrong.
    WrongSignature,
    /// `AuthenticationMD5Password`, then `AuthenticationOk` and `ReadyForQuery`.
    Md5,
    /// `AuthenticationCleartextPassword`, then `AuthenticationOk` and `ReadyForQuery`.
    Cleartext,
}

/// One message from the client: its tag and body.
fn read_message(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    s.read_exact(&mut head).ok()?;
    let len = usize::try_from(u32::from_be_bytes([head[1], head[2], head[3], head[4]])).ok()?;
    let mut body = vec![0u8; len.checked_sub(4)?];
    s.read_exact(&mut body).ok()?;
    Some((head[0], body))
}

fn send(s: &mut TcpStream, tag: u8, body: &[u8]) {
    let len = u32::try_from(body.len() + 4).expect("a short message");
    let mut out = vec![tag];
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    // The client may have hung up already: that is what several scripts expect.
    let _ = s.write_all(&out);
}

fn auth(s: &mut TcpStream, code: i32, rest: &[u8]) {
    let mut body = code.to_be_bytes().to_vec();
    body.extend_from_slice(rest);
    send(s, b'R', &body);
}

fn ready(s: &mut TcpStream) {
    auth(s, 0, &[]);
    send(s, b'Z', b"I");
}

/// The SCRAM client nonce in a SASLInitialResponse body.
fn client_nonce(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let at = text.find("r=").expect("a client nonce");
    text[at + 2..].trim_end_matches('\0').to_string()
}

/// The body of a length-prefixed packet without a tag (the startup message, SSLRequest).
fn startup_packet(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a startup packet");
    let len = usize::try_from(u32::from_be_bytes(len)).expect("a length");
    let mut body = vec![0u8; len.checked_sub(4).expect("a sane length")];
    s.read_exact(&mut body).expect("the startup packet's body");
    body
}

/// Plays `script` to one client and returns the tags of the messages the client sent after
/// its startup message (until it hung up).
fn serve(listener: TcpListener, script: Script) -> Vec<u8> {
    let (mut s, _) = listener.accept().expect("the client connects");
    // The client asks for TLS first (sslmode=prefer): this server has none.
    let mut first = startup_packet(&mut s);
    if first == 80_877_103_u32.to_be_bytes() {
        s.write_all(b"N").expect("refuse TLS");
        first = startup_packet(&mut s);
    }
    assert_eq!(first[..4], 196_608_u32.to_be_bytes(), "protocol 3.0");
    let mut sent = Vec::new();
    let scram_challenge = |s: &mut TcpStream, sent: &mut Vec<u8>, iterations: &str| {
        auth(s, 10, b"SCRAM-SHA-256\0\0");
        let Some((tag, body)) = read_message(s) else {
            return false;
        };
        sent.push(tag);
        let nonce = client_nonce(&body);
        let first = format!("r={nonce}ServerPart,s=QSXCR+Q6sek8bf92,i={iterations}");
        auth(s, 11, first.as_bytes());
        match read_message(s) {
            Some((tag, _)) => {
                sent.push(tag);
                true
            }
            None => false,
        }
    };
    match script {
        Script::ScramIterations(i) => {
            if scram_challenge(&mut s, &mut sent, i) {
                ready(&mut s);
            }
        }
        Script::OkWithoutFinal => {
            if scram_challenge(&mut s, &mut sent, "4096") {
                ready(&mut s);
            }
        }
        Script::WrongSignature => {
            if scram_challenge(&mut s, &mut sent, "4096") {
                auth(
                    &mut s,
                    12,
                    b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                );
                ready(&mut s);
            }
        }
        Script::Md5 | Script::Cleartext => {
            match script {
                Script::Md5 => auth(&mut s, 5, b"salt"),
                _ => auth(&mut s, 3, &[]),
            }
            if let Some((tag, _)) = read_message(&mut s) {
                sent.push(tag);
                ready(&mut s);
            }
        }
    }
    // Whatever else the client sends (a Terminate) until it hangs up.
    while let Some((tag, _)) = read_message(&mut s) {
        sent.push(tag);
    }
    sent
}

/// Starts the scripted server and returns the URL to reach it.
#[allow(
    clippy::disallowed_methods,
    reason = "the scripted server must answer while the client under test blocks in connect"
)]
fn start(script: Script) -> (String, JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("the bound address").port();
    let server = std::thread::spawn(move || serve(listener, script));
    (
        format!("postgres://alice:pw@127.0.0.1:{port}/db?connect_timeout=30"),
        server,
    )
}

fn connect(url: &str) -> Result<Client, Error> {
    Client::connect(&Config::parse(url).expect("the scripted server's URL"))
}

#[test]
fn a_huge_scram_iteration_count_is_refused_before_any_work() {
    let (url, server) = start(Script::ScramIterations("4294967295"));
    let err = connect(&url).expect_err("a hostile iteration count");
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(err.to_string().contains("iteration count"), "{err}");
    // The client sent its first message and no proof.
    assert_eq!(server.join().unwrap(), b"p");

    // A count in the usual range is answered (then the missing SASLFinal is refused).
    let (url, server) = start(Script::ScramIterations("4096"));
    let err = connect(&url).expect_err("no SASLFinal");
    assert!(err.to_string().contains("before proving"), "{err}");
    assert_eq!(server.join().unwrap(), b"pp");
}

#[test]
fn authentication_ok_without_sasl_final_is_refused() {
    let (url, server) = start(Script::OkWithoutFinal);
    let err = connect(&url).expect_err("AuthenticationOk before the server proved itself");
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(err.to_string().contains("before proving"), "{err}");
    assert!(!err.to_string().contains("pw"), "{err}");
    assert_eq!(server.join().unwrap(), b"pp");
}

#[test]
fn a_wrong_server_signature_is_refused() {
    let (url, server) = start(Script::WrongSignature);
    let err = connect(&url).expect_err("a server that does not know the password");
    assert!(matches!(err, Error::Auth(_)), "{err:?}");
    assert!(err.to_string().contains("signature is refused"), "{err}");
    assert_eq!(server.join().unwrap(), b"pp");
}

#[test]
fn md5_and_cleartext_over_tcp_are_refused_unless_the_url_opts_in() {
    for (script, method) in [(Script::Md5, "`md5`"), (Script::Cleartext, "`password`")] {
        let (url, server) = start(script);
        let err = connect(&url).expect_err("a weak method over TCP");
        assert!(matches!(err, Error::Auth(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(method) && text.contains("allow_weak_auth=true"),
            "{text}"
        );
        assert!(
            server.join().unwrap().is_empty(),
            "nothing is sent for a refused {method}"
        );

        let (url, server) = start(script);
        let client = connect(&format!("{url}&allow_weak_auth=true")).expect("opted in");
        drop(client);
        // The password message, then Terminate.
        assert_eq!(server.join().unwrap(), b"pX");
    }
}
