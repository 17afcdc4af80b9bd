//! Token buckets per server and per tool (governor). A call over either limit is refused at
//! once with when to retry; nothing ever waits, so one busy server never slows another.

use crate::FastMap;
use crate::config::{Limit, RateLimits};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;
use std::time::Duration;

/// Which bucket refused a call.
#[derive(Debug, Clone)]
pub struct Limited {
    /// `server github` or `tool github:create_issue`.
    pub which: String,
    pub limit: Limit,
    pub retry_after: Duration,
}

struct Bucket {
    limiter: DefaultDirectRateLimiter,
    limit: Limit,
}

fn bucket(limit: Limit) -> Option<Bucket> {
    let period = Duration::from_secs_f64(1.0 / limit.per_second);
    let quota = Quota::with_period(period)?.allow_burst(NonZeroU32::new(limit.burst)?);
    Some(Bucket {
        limiter: RateLimiter::direct(quota),
        limit,
    })
}

type Buckets = FastMap<String, Bucket>;

pub struct Limiter {
    servers: Buckets,
    tools: Buckets,
    clock: DefaultClock,
}

impl Limiter {
    /// One bucket per configured server (its own limit, or the default) and per limited tool.
    pub fn new(cfg: &RateLimits, servers: &[String]) -> Limiter {
        let mut by_server = Buckets::default();
        for s in servers {
            let own = cfg.servers.iter().find(|(n, _)| n == s).map(|(_, l)| *l);
            if let Some(b) = own.unwrap_or(cfg.default).and_then(bucket) {
                by_server.insert(s.clone(), b);
            }
        }
        let tools = cfg
            .tools
            .iter()
            .filter_map(|(n, l)| l.and_then(bucket).map(|b| (n.clone(), b)))
            .collect();
        Limiter {
            servers: by_server,
            tools,
            clock: DefaultClock::default(),
        }
    }

    /// Takes one token from the server's and the tool's buckets, or says which refused.
    pub fn check(&self, server: &str, qualified: &str) -> Result<(), Limited> {
        let buckets = [
            ("server", server, self.servers.get(server)),
            ("tool", qualified, self.tools.get(qualified)),
        ];
        for (kind, name, bucket) in buckets {
            let Some(b) = bucket else { continue };
            // Everything past the check is for a refusal only: the common case stays a
            // lookup and an atomic update per bucket.
            if let Err(not_until) = b.limiter.check() {
                return Err(Limited {
                    which: format!("{kind} {name}"),
                    limit: b.limit,
                    retry_after: not_until.wait_time_from(self.clock.now()),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refusal_per_bucket() {
        let cfg = RateLimits {
            default: Some(Limit {
                per_second: 1.0,
                burst: 3,
            }),
            servers: vec![("free".into(), None)],
            tools: vec![(
                "a:slow".into(),
                Some(Limit {
                    per_second: 0.5,
                    burst: 1,
                }),
            )],
        };
        let l = Limiter::new(&cfg, &["a".into(), "b".into(), "free".into()]);
        for _ in 0..3 {
            assert!(l.check("a", "a:x").is_ok());
        }
        let e = l.check("a", "a:x").unwrap_err();
        assert_eq!(e.which, "server a");
        assert!(e.retry_after > Duration::ZERO && e.retry_after <= Duration::from_secs(1));
        assert!(
            l.check("b", "b:x").is_ok(),
            "another server's bucket is untouched"
        );
        for _ in 0..100 {
            assert!(l.check("free", "free:x").is_ok());
        }
        assert!(l.check("b", "a:slow").is_ok());
        assert_eq!(l.check("b", "a:slow").unwrap_err().which, "tool a:slow");
    }
}
