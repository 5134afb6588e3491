use std::net::{Ipv4Addr, Ipv6Addr};

use http::HeaderValue;

use super::*;

fn ip(last: u8) -> Option<IpAddr> {
    Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)))
}

/// Validates once from `key` with the given outcome; whether the limiter let it through.
fn attempt(limit: &AuthFailureLimit, key: Option<IpAddr>, rejected: bool) -> bool {
    match limit.admit(key) {
        admit @ Admit::Go { .. } => {
            limit.settle(admit, rejected);
            true
        }
        Admit::Refuse { .. } => false,
    }
}

#[tokio::test(start_paused = true)]
async fn rejections_past_the_limit_are_refused_until_the_window_moves() {
    let limit = AuthFailureLimit::per_minute(5);
    for _ in 0..5 {
        assert!(attempt(&limit, ip(1), true));
    }
    let Admit::Refuse { retry_after } = limit.admit(ip(1)) else {
        panic!("a sixth rejection within the minute was let through");
    };
    assert_eq!(retry_after, 12, "one rejection frees up every 12 s");
    // Another address is not affected.
    assert!(attempt(&limit, ip(2), true));
    tokio::time::advance(Duration::from_secs(12)).await;
    assert!(attempt(&limit, ip(1), true));
    assert!(!attempt(&limit, ip(1), true));
}

#[tokio::test(start_paused = true)]
async fn valid_tokens_are_never_counted() {
    let limit = AuthFailureLimit::per_minute(2);
    for _ in 0..1_000 {
        assert!(attempt(&limit, ip(1), false));
    }
    assert_eq!(limit.tracked(), 0);
    // With rejections on record, valid calls refund their reservation.
    assert!(attempt(&limit, ip(1), true));
    for _ in 0..100 {
        assert!(attempt(&limit, ip(1), false));
    }
    assert!(attempt(&limit, ip(1), true));
    assert!(!attempt(&limit, ip(1), true));
}

#[tokio::test(start_paused = true)]
async fn concurrent_attempts_from_a_known_offender_reserve_their_rejection() {
    let limit = AuthFailureLimit::per_minute(4);
    assert!(attempt(&limit, ip(1), true));
    // Three more calls in flight at once use up the rest of the minute's budget.
    let in_flight: Vec<Admit> = (0..3).map(|_| limit.admit(ip(1))).collect();
    assert!(in_flight.iter().all(|a| matches!(a, Admit::Go { .. })));
    assert!(matches!(limit.admit(ip(1)), Admit::Refuse { .. }));
    for admit in in_flight {
        limit.settle(admit, true);
    }
    assert!(matches!(limit.admit(ip(1)), Admit::Refuse { .. }));
}

#[tokio::test(start_paused = true)]
async fn the_table_is_bounded_and_keeps_what_it_holds() {
    let limit = AuthFailureLimit::per_minute(1).max_addresses(3);
    for last in 1..=3 {
        assert!(attempt(&limit, ip(last), true));
    }
    // Full: a fourth address is served, untracked; the three keep their records.
    assert!(attempt(&limit, ip(4), true));
    assert_eq!(limit.tracked(), 3);
    for last in 1..=3 {
        assert!(
            !attempt(&limit, ip(last), true),
            "192.0.2.{last} was forgotten"
        );
    }
    // Records that ran out make room.
    tokio::time::advance(MINUTE).await;
    assert!(attempt(&limit, ip(4), true));
    assert!(!attempt(&limit, ip(4), true));
}

#[test]
fn the_key_is_the_socket_or_the_trusted_header_and_ipv6_counts_per_64() {
    let mut extensions = Extensions::new();
    extensions.insert(SocketAddr::from(([10, 0, 0, 1], 4000)));
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-forwarded-for",
        HeaderValue::from_static("203.0.113.9, 198.51.100.7"),
    );
    let socket = AuthFailureLimit::per_minute(1);
    assert_eq!(
        socket.key(&headers, &extensions),
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))
    );
    let proxied = socket
        .clone()
        .trusted_header(HeaderName::from_static("x-forwarded-for"));
    assert_eq!(
        proxied.key(&headers, &extensions),
        Some(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)))
    );
    // An unparsable header falls back to the socket.
    headers.insert("x-forwarded-for", HeaderValue::from_static("garbage"));
    assert_eq!(
        proxied.key(&headers, &extensions),
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))
    );

    let mut v6 = Extensions::new();
    let addr: Ipv6Addr = "2001:db8:1:2:aaaa:bbbb:cccc:dddd".parse().unwrap();
    v6.insert(SocketAddr::from((addr, 4000)));
    let prefix: Ipv6Addr = "2001:db8:1:2::".parse().unwrap();
    assert_eq!(socket.key(&HeaderMap::new(), &v6), Some(IpAddr::V6(prefix)));
    assert_eq!(socket.key(&HeaderMap::new(), &Extensions::new()), None);
}
