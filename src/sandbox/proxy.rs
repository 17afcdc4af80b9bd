//! The egress proxy: one loopback HTTP proxy per confined server, forwarding only to the hosts
//! its profile allows.
