//! The one source of randomness: the kernel's generator (`getrandom(2)` through rustix), for
//! every id, ticket, nonce and jitter. No seeded or hashed stand-in: std's `RandomState` keys
//! and the time are not random enough for ids two processes draw at once.

use std::io;

/// Fills `buf` from the kernel's generator (retried on a short read or an interrupted call).
pub(crate) fn fill(mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match rustix::rand::getrandom(&mut *buf, rustix::rand::GetRandomFlags::empty()) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the kernel's random generator returned no bytes",
                ));
            }
            Ok(n) => buf = &mut buf[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `bytes` random bytes as `2 * bytes` lower-case hex digits.
pub(crate) fn hex(bytes: usize) -> io::Result<String> {
    let mut raw = vec![0u8; bytes];
    fill(&mut raw)?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// `digits` random lower-case hex digits (an odd count drops the last half byte).
pub(crate) fn hex_digits(digits: usize) -> io::Result<String> {
    let mut out = hex(digits.div_ceil(2))?;
    out.truncate(digits);
    Ok(out)
}

/// A random number in `0..bound` (`bound` > 0), without modulo bias.
pub(crate) fn below(bound: u64) -> io::Result<u64> {
    let bound = bound.max(1);
    let zone = u64::MAX - (u64::MAX % bound);
    loop {
        let mut raw = [0u8; 8];
        fill(&mut raw)?;
        let n = u64::from_le_bytes(raw);
        if n < zone {
            return Ok(n % bound);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_has_the_asked_length_and_alphabet() {
        for (got, len) in [
            (hex(16).unwrap(), 32),
            (hex_digits(8).unwrap(), 8),
            (hex_digits(7).unwrap(), 7),
            (hex(0).unwrap(), 0),
        ] {
            assert_eq!(got.len(), len);
            assert!(
                got.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
        }
        assert_ne!(hex(16).unwrap(), hex(16).unwrap());
    }

    #[test]
    fn below_stays_below_its_bound_and_covers_it() {
        let mut seen = [false; 4];
        for _ in 0..400 {
            let n = below(4).unwrap();
            assert!(n < 4);
            seen[n as usize] = true;
        }
        assert_eq!(seen, [true; 4]);
        assert_eq!(below(1).unwrap(), 0);
    }

    #[test]
    fn a_large_buffer_is_filled_whole() {
        let mut buf = vec![0u8; 4096];
        fill(&mut buf).unwrap();
        assert!(buf.iter().filter(|&&b| b == 0).count() < 256);
    }
}
